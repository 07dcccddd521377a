/* Internal interface of the Jinja interpreter behind chat_template.h: memory pool, values,
 * lexer tokens, AST nodes, evaluator context and builtins (filters, tests, methods). Not a
 * public API: only src/jinja/jinja_*.c and tok/chat_template.c, tok/chat_dsv32.c include it. */
#ifndef MLA_JINJA_JINJA_H
#define MLA_JINJA_JINJA_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "base/strbuf.h"
#include "base/utf8.h"

/* ---- memory pool: chunked bump allocator, freed all at once ---- */
struct jpool {
	struct jpool_chunk *head;
	size_t total, limit; /* bytes allocated so far; 0 limit = none */
	bool over;           /* set once an allocation hit the limit */
};
void jpool_init(struct jpool *p, size_t limit);
void jpool_fini(struct jpool *p);
void *jpool_alloc(struct jpool *p, size_t n);                 /* zeroed; NULL when over the limit / OOM */
char *jpool_strdup(struct jpool *p, const char *s, size_t n); /* NUL-terminated copy */

/* ---- values ---- */
enum jkind {
	JV_UNDEF,
	JV_NONE,
	JV_BOOL,
	JV_INT,
	JV_FLOAT,
	JV_STR,
	JV_LIST,
	JV_DICT,
	JV_NS,     /* namespace(): a mutable dict reached by attribute */
	JV_MACRO,  /* u.macro */
	JV_FUNC,   /* builtin global function, u.i = id */
	JV_METHOD, /* bound method: u.m */
};

struct jlist;
struct jdict;
struct jnode;
struct jmethod;

struct jval {
	enum jkind k;
	union {
		bool b;
		long long i;
		double f;
		struct {
			const char *p; /* JV_STR: bytes (UTF-8); JV_UNDEF: hint for errors or NULL */
			size_t n;
		} s;
		struct jlist *l;
		struct jdict *d;
		const struct jnode *macro;
		struct jmethod *m;
	} u;
};

struct jlist {
	struct jval *v;
	size_t n, cap;
	bool tuple; /* repr as (a, b) */
};

struct jdict {
	struct jval *keys; /* JV_STR keys (other scalars allowed for literals) */
	struct jval *vals;
	size_t n, cap;
};

struct jmethod {
	struct jval self;
	const char *name;
};

/* ---- lexer ---- */
enum jtok {
	TK_EOF,
	TK_DATA,
	TK_BLOCK_BEGIN,
	TK_BLOCK_END,
	TK_VAR_BEGIN,
	TK_VAR_END,
	TK_NAME,
	TK_STRING,
	TK_INT,
	TK_FLOAT,
	TK_OP,
};

/* Operators: their source text is the identity (op field holds an OP_* code). */
enum jop {
	OP_ADD = 1,
	OP_SUB,
	OP_MUL,
	OP_DIV,
	OP_FLOORDIV,
	OP_MOD,
	OP_POW,
	OP_TILDE,
	OP_EQ,
	OP_NE,
	OP_LT,
	OP_LE,
	OP_GT,
	OP_GE,
	OP_ASSIGN,
	OP_DOT,
	OP_COMMA,
	OP_COLON,
	OP_PIPE,
	OP_LPAREN,
	OP_RPAREN,
	OP_LBRACKET,
	OP_RBRACKET,
	OP_LBRACE,
	OP_RBRACE,
	OP_SEMI,
	/* evaluator-only ops */
	OP_IN,
	OP_NOTIN,
	OP_NEG,
	OP_POS,
};

struct jtoken {
	enum jtok t;
	int line;
	int op;        /* TK_OP */
	const char *s; /* TK_DATA/TK_NAME/TK_STRING: text (pool, NUL-terminated) */
	size_t n;
	long long i; /* TK_INT */
	double f;    /* TK_FLOAT */
};

/* Tokenize with HF's settings (trim_blocks, lstrip_blocks, newline normalisation, one
 * trailing newline dropped). Tokens and strings live in `pool`. */
int jinja_lex(const char *src, struct jpool *pool, struct jtoken **out, size_t *n_out, struct err *e);

/* Byte length of the Unicode whitespace character (Python str.isspace) at s[i], else 0. */
size_t jinja_space_len(const char *s, size_t n, size_t i);

/* ---- AST ---- */
enum jnkind {
	/* statements */
	N_DATA,
	N_OUTPUT,
	N_IF,
	N_FOR,
	N_SET,
	N_SET_ATTR,
	N_SET_BLOCK,
	N_MACRO,
	N_BREAK,
	N_CONTINUE,
	N_BODY,
	/* expressions */
	E_CONST,
	E_NAME,
	E_GETATTR,
	E_GETITEM,
	E_SLICE,
	E_CALL,
	E_FILTER,
	E_TEST,
	E_UNARY,
	E_BINARY,
	E_COMPARE,
	E_AND,
	E_OR,
	E_NOT,
	E_COND,
	E_LIST,
	E_TUPLE,
	E_DICT,
};

struct jnode {
	enum jnkind kind;
	int line;
	int op;                      /* E_UNARY/E_BINARY op; E_TEST negated flag */
	const char *name;            /* E_NAME, E_GETATTR attr, E_FILTER/E_TEST name, N_SET target,
				     N_MACRO name, N_DATA text */
	size_t name_n;               /* N_DATA length */
	struct jnode *a, *b, *c, *d; /* children (meaning by kind, see jinja_parse.c) */
	struct jnode **list;         /* body / args / items / compare operands */
	int n;
	struct jnode **list2; /* else body / kwarg values / dict values */
	int n2;
	const char **names; /* kwarg names / for targets / macro params / compare ops */
	int *ops;           /* E_COMPARE ops (n entries) */
	int nnames;
	struct jval val; /* E_CONST */
};

/* Parse tokens into a body node (N_BODY). Compile errors name the construct and line. */
int jinja_parse(const struct jtoken *toks, size_t n, struct jpool *pool, struct jnode **out, struct err *e);

/* ---- evaluator ---- */
struct jscope;

struct jctx {
	struct jpool *pool; /* per-render values */
	struct strbuf *out; /* current output (block set swaps it) */
	struct jscope *root, *cur;
	struct err *e;
	int line;        /* line of the node being evaluated (for errors) */
	int depth;       /* macro/eval recursion depth */
	int nest;        /* jinja_eval / jinja_exec calls in progress (JINJA_MAX_NEST) */
	long long steps; /* loop iterations + macro calls, capped */
	int loop_ctl;    /* 0, 1 break, 2 continue */
};

int jinja_exec(struct jctx *c, const struct jnode *body);
/* A JSON value (jansson's) as a template value on c's pool, object keys in their order; -1
 * with c's error set when too deep or out of memory (chat_template.c). */
struct json_t;
int jinja_from_json(struct jctx *c, const struct json_t *j, struct jval *out);
int jinja_eval(struct jctx *c, const struct jnode *x, struct jval *out);
void jscope_set(struct jctx *c, struct jscope *s, const char *name, struct jval v);
struct jscope *jscope_new(struct jctx *c, struct jscope *parent);
int jinja_call_macro(struct jctx *c, const struct jnode *m, const struct jval *args, int nargs, const char **kwnames,
		     const struct jval *kwargs, int nkw, struct jval *out);
int jerr(struct jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- value helpers (jinja_value.c) ---- */
struct jval jv_undef(const char *hint);
struct jval jv_none(void);
struct jval jv_bool(bool b);
struct jval jv_int(long long i);
struct jval jv_float(double f);
struct jval jv_str(const char *p, size_t n); /* no copy */
struct jval jv_cstr(const char *p);
struct jval jv_list(struct jpool *p, size_t cap);
struct jval jv_dict(struct jpool *p, size_t cap);
int jlist_push(struct jpool *p, struct jlist *l, struct jval v);
int jdict_set(struct jpool *p, struct jdict *d, struct jval key, struct jval v);
struct jval *jdict_get(const struct jdict *d, const char *k, size_t n);
bool jv_truthy(const struct jval *v);
bool jv_equal(const struct jval *a, const struct jval *b);
const char *jv_typename(const struct jval *v); /* Python type name: 'str', 'NoneType' */
/* Python str() / repr(); to_json is HF tojson (json.dumps ensure_ascii=False). */
int jv_to_str(struct jctx *c, const struct jval *v, struct strbuf *b);
int jv_repr(struct jctx *c, const struct jval *v, struct strbuf *b);
int jv_to_json(struct jctx *c, const struct jval *v, struct strbuf *b, const char *indent, const char *item_sep,
	       const char *key_sep, bool sort_keys, int level);
/* str(v) as a pool string */
int jv_stringify(struct jctx *c, const struct jval *v, struct jval *out);
int jv_compare(struct jctx *c, const struct jval *a, const struct jval *b, int *cmp);
int jv_contains(struct jctx *c, const struct jval *hay, const struct jval *needle, bool *res);
/* Iterate: lists/tuples -> items; dicts -> keys; strings -> characters; undefined -> none. */
int jv_iter_list(struct jctx *c, const struct jval *v, struct jval *out_list);

/* ---- builtins (jinja_builtins.c; jinja_filter in jinja_filters.c) ---- */
bool jinja_filter_known(const char *name);
bool jinja_test_known(const char *name);
int jinja_filter(struct jctx *c, const char *name, struct jval *v, const struct jval *args, int nargs,
		 const char **kwnames, const struct jval *kwargs, int nkw, struct jval *out);
int jinja_test(struct jctx *c, const char *name, const struct jval *v, const struct jval *args, int nargs, bool *out);
/* Global function by name (range, namespace, dict, raise_exception, strftime_now). */
bool jinja_global_lookup(const char *name, struct jval *out);
/* Call a JV_FUNC / JV_METHOD / JV_MACRO value. */
int jinja_call(struct jctx *c, const struct jval *fn, const struct jval *args, int nargs, const char **kwnames,
	       const struct jval *kwargs, int nkw, struct jval *out);
/* obj.attr: a method of a str/dict, else a dict key / namespace attribute, else undefined. */
int jinja_getattr(struct jctx *c, const struct jval *obj, const char *attr, struct jval *out);

/* helpers shared by jinja_builtins.c and jinja_filters.c */
/* Call argument: positional i, else keyword `name` (either may be -1 / NULL); NULL if absent. */
const struct jval *jinja_arg(const struct jval *args, int nargs, const char **kwnames, const struct jval *kwargs,
			     int nkw, int i, const char *name);
struct jval jinja_strip(const struct jval *s, const struct jval *chars, bool left, bool right);
int jinja_change_case(struct jctx *c, const struct jval *s, int mode,
		      struct jval *out); /* 0 lower 1 upper 2 capitalize 3 title */
int jinja_replace(struct jctx *c, const struct jval *s, const struct jval *old, const struct jval *new_,
		  long long count, struct jval *out);
int jinja_join(struct jctx *c, const struct jval *seq, const struct jval *sep, const char *attr, struct jval *out);
int jinja_pool_str(struct jctx *c, struct strbuf *b, struct jval *out); /* frees b->p */

/* limits */
#define JINJA_MAX_DEPTH 64 /* macro call / parser nesting depth */
#define JINJA_MAX_NEST \
	1024                        /* expressions and statements being evaluated inside each
				     * other, across macro calls (64 calls x 256-deep expressions
				     * would overflow the stack) */
#define JINJA_MAX_STEPS 1000000LL   /* loop iterations + macro calls per render */
#define JINJA_MAX_OUT (64u << 20)   /* rendered bytes */
#define JINJA_MAX_POOL (256u << 20) /* scratch bytes per render */

#endif
