/* Log-sum-exp merge of two partial attention results over disjoint key sets
 * (docs/mla-dcp.md §2.5 step 5). */
#ifndef MLA_ATTN_MERGE_H
#define MLA_ATTN_MERGE_H

/* Per (token t, head h): +inf LSEs are read as -inf; m = max(lp, ls); wp = exp(lp - m),
 * ws = exp(ls - m); out = (wp·op + ws·os)/(wp + ws); lse_out = log(wp + ws) + m. Both -inf:
 * out = 0, lse_out = -inf. Layouts: o [n, n_heads, dv], lse [n, n_heads]. out / lse_out may
 * alias the prefix or the suffix arrays. */
void attn_merge_states(int n, int n_heads, int dv, const float *o_p, const float *lse_p, const float *o_s,
		       const float *lse_s, float *out, float *lse_out);

#endif
