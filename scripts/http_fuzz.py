#!/usr/bin/env python3
"""Black-box fuzzing of a running `mlaserve serve` over raw HTTP/1.1: random and mutated
requests on every route (bodies from tests/fuzz/corpus/request, truncated, bit-flipped,
with wrong Content-Length, chunked, pipelined), streams dropped midway, slow and half-closed
clients. Checks that the server answers every whole request with a status line (4xx/5xx
error bodies are JSON with an "error" object), never closes a connection without an answer
to a complete request, and is still alive and healthy at the end. Run it against an ASan
build to catch memory errors in the server layer:

  build-asan/mlaserve serve tests/fixtures/tiny-v3 --port 8123 &
  python3 scripts/http_fuzz.py --port 8123 --seconds 300

Prints a summary; exits 1 when a check failed (the failing request is printed)."""
import argparse, json, os, random, re, socket, sys, time

ROUTES = [("POST", "/v1/chat/completions"), ("POST", "/v1/completions"), ("POST", "/v1/responses"),
          ("GET", "/v1/models"), ("GET", "/health"), ("GET", "/metrics"), ("GET", "/version"),
          ("POST", "/tokenize"), ("POST", "/detokenize"), ("GET", "/v1/responses/resp_x"),
          ("DELETE", "/v1/responses/resp_x"), ("GET", "/v1/responses/resp_x/input_items"),
          ("OPTIONS", "/v1/chat/completions"), ("PUT", "/v1/models"), ("GET", "/nope"), ("POST", "/v1/embeddings")]


def corpus():
    out = []
    d = "tests/fuzz/corpus/request"
    for name in sorted(os.listdir(d)):
        raw = open(os.path.join(d, name), "rb").read()
        body = raw[1:].split(b"\0")[0]
        try:
            json.loads(body)
            out.append((raw[0] % 3, body))
        except Exception:
            pass
    return out


def mutate(rng, body):
    b = bytearray(body)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(6)
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            del b[rng.randrange(len(b)):][: rng.randrange(1, 20)]
        elif op == 2:
            b[rng.randrange(len(b) + 1):rng.randrange(len(b) + 1)] = rng.choice(
                [b'"', b"{", b"}", b"[", b"]", b",", b"null", b"-1", b"1e999", b"\\u0000", b"\xff", b'"stream":true',
                 b'"n":128', b'"max_tokens":0', b'"logprobs":true', b'"top_logprobs":20'])
        elif op == 3 and b:
            b = b[: rng.randrange(len(b))]
        elif op == 4:
            try:
                j = json.loads(bytes(b))
                if isinstance(j, dict):
                    k = rng.choice(["stream", "n", "max_tokens", "temperature", "seed", "stop", "logprobs",
                                    "echo", "messages", "prompt", "input", "tools", "tool_choice", "guided_grammar",
                                    "response_format", "stream_options", "priority", "previous_response_id"])
                    j[k] = rng.choice([None, True, False, 0, -1, 1, 2, 3.5, 1e300, "", "x" * rng.randrange(1, 64), [],
                                       {}, [1, 2], {"a": 1}, [{"role": "user", "content": "hi"}],
                                       {"include_usage": True}])
                    b = bytearray(json.dumps(j).encode())
            except Exception:
                pass
        else:
            b += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    return bytes(b)


def recv_all(s, limit=4 << 20, timeout=30):
    s.settimeout(timeout)
    data = b""
    while len(data) < limit:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return data, "timeout"
        except ConnectionResetError:
            return data, "reset"
        if not chunk:
            return data, "closed"
        data += chunk
    return data, "limit"


class Fail(Exception):
    pass


def check_response(data, why, req):
    if not data.startswith(b"HTTP/1.1 ") and not data.startswith(b"HTTP/1.0 "):
        raise Fail("no status line (%s) for %r" % (why, req[:300]))
    status = int(data[9:12])
    head, _, body = data.partition(b"\r\n\r\n")
    if status >= 400 and b"chunked" not in head.lower():
        if b"application/json" not in head.lower():
            raise Fail("a %d error that is not JSON: %r for %r" % (status, data[:300], req[:200]))
        try:
            j = json.loads(body)
            if "error" not in j and "detail" not in j:
                raise Fail("error body without 'error': %r for %r" % (body[:200], req[:200]))
        except ValueError:
            raise Fail("error body is not JSON: %r for %r" % (body[:200], req[:200]))
    return status


def one(rng, port, bodies, stats):
    method, path = rng.choice(ROUTES)
    api, body = rng.choice(bodies)
    if path == "/v1/chat/completions" and api != 0 or path == "/v1/completions" and api != 1:
        body = rng.choice(bodies)[1]
    if rng.random() < 0.7:
        body = mutate(rng, body)
    kind = rng.randrange(12)
    if kind >= 10:  # a framing error: a 4xx/5xx JSON error at once, one answer, then the close
        return one_framing(rng, port, method, path, body, stats)
    headers = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
               "Connection: close"]
    if kind == 0:  # chunked
        chunks = b""
        i = 0
        while i < len(body):
            n = rng.randrange(1, 64)
            chunks += b"%x\r\n" % len(body[i:i + n]) + body[i:i + n] + b"\r\n"
            i += n
        payload = chunks + b"0\r\n\r\n"
        headers.append("Transfer-Encoding: chunked")
    else:
        payload = body
        cl = len(body)
        if kind == 1:
            cl = max(0, cl + rng.choice([-5, -1, 1, 7]))  # wrong length: the server waits or reads short
        headers.append(f"Content-Length: {cl}")
    if kind == 2:
        headers.append("Authorization: Bearer " + "x" * rng.randrange(0, 300))
    if kind == 3:
        headers.append("X-" + "h" * rng.randrange(1, 40) + ": " + "v" * rng.randrange(0, 8000))
    req = ("\r\n".join(headers) + "\r\n\r\n").encode() + payload
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        if kind == 4:  # slowly, in pieces
            for i in range(0, len(req), 97):
                s.sendall(req[i:i + 97])
                time.sleep(0.001)
        else:
            s.sendall(req)
        if kind == 5 and b'"stream"' in body:  # drop a stream midway
            s.settimeout(10)
            try:
                s.recv(rng.randrange(1, 400))
            except Exception:
                pass
            stats["dropped"] += 1
            return
        if kind == 6:  # half-close and read
            s.shutdown(socket.SHUT_WR)
        if kind == 1 and len(payload) < int(headers[-1].split(": ")[1]):
            s.settimeout(0.1)  # a short body: the server waits for the rest; give up
            try:
                s.recv(100)
            except Exception:
                pass
            stats["short"] += 1
            return
        data, why = recv_all(s, timeout=60)
        st = check_response(data, why, req)
        stats[st // 100 * 100] = stats.get(st // 100 * 100, 0) + 1
    finally:
        s.close()


# Heads that RFC 9112 requires a server to refuse (each a 4xx/5xx, then the connection closes),
# as (name, extra header lines, body, expected status): the cases of --cases, and what
# one_framing mixes into random requests.
FRAMING = [
    ("Content-Length -1", ["Content-Length: -1"], b"", 400),
    ("Content-Length abc", ["Content-Length: abc"], b"", 400),
    ("Content-Length empty", ["Content-Length:"], b"", 400),
    ("Content-Length 1e3", ["Content-Length: 1e3"], b"", 400),
    ("Content-Length +5", ["Content-Length: +5"], b"", 400),
    ("Content-Length too large", ["Content-Length: 99999999999999999999999"], b"", 413),
    ("two conflicting Content-Length", ["Content-Length: 2", "Content-Length: 40"], b"{}", 400),
    ("a Content-Length list that differs", ["Content-Length: 2, 40"], b"{}", 400),
    ("Transfer-Encoding gzip", ["Transfer-Encoding: gzip"], b"", 501),
    ("Transfer-Encoding gzip, chunked", ["Transfer-Encoding: gzip, chunked"], b"0\r\n\r\n", 501),
    ("Transfer-Encoding chunked twice", ["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"],
     b"0\r\n\r\n", 400),
    ("Transfer-Encoding and Content-Length", ["Transfer-Encoding: chunked", "Content-Length: 5"],
     b"0\r\n\r\n", 400),
    ("a header line without a colon", ["Foo bar"], b"", 400),
    ("a space before the colon", ["Foo : bar"], b"", 400),
    ("obsolete line folding", ["Foo: bar", " baz"], b"", 400),
    ("a control character in a value", ["Foo: b\x01r"], b"", 400),
    ("a bare CR in a value", ["Foo: b\rr"], b"", 400),
    ("two Host headers", ["Host: other"], b"", 400),
    ("a 1 MB header", ["X-Big: " + "a" * (1 << 20)], b"", 431),
    ("a bad chunk size", ["Transfer-Encoding: chunked"], b"zz\r\n", 400),
    ("a negative chunk size", ["Transfer-Encoding: chunked"], b"-1\r\n", 400),
    ("a chunk longer than its size", ["Transfer-Encoding: chunked"], b"2\r\n{}}\r\n0\r\n\r\n", 400),
    ("a malformed trailer", ["Transfer-Encoding: chunked"], b"2\r\n{}\r\n0\r\nbad\r\n\r\n", 400),
]
REQUEST_LINES = [  # (name, request line, expected status)
    ("HTTP/9.9", "GET /health HTTP/9.9", 505),
    ("HTTP/2.0 in an HTTP/1 request line", "GET /health HTTP/2.0", 505),
    ("a lower-case version", "GET /health http/1.1", 400),
    ("no version", "GET /health", 400),
    ("two spaces", "GET  /health HTTP/1.1", 400),
    ("a control character in the target", "GET /he\x01alth HTTP/1.1", 400),
    ("a 64 KB request target", "GET /" + "a" * 65536 + " HTTP/1.1", 414),
]
NO_HOST = ("an HTTP/1.1 request without Host", b"GET /health HTTP/1.1\r\nAccept: */*\r\n\r\n", 400)


def exchange(port, req, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(req)
    except OSError:
        pass  # the server may answer and close before a large request is sent whole
    data, why = recv_all(s, timeout=timeout)
    s.close()
    return data, why


def check_framing(port, req, want, timeout=10):
    """One answer with status want (or any 4xx/5xx when want is None), a JSON error body,
    and the connection closed after it (nothing behind the error runs), in time."""
    t0 = time.time()
    data, why = exchange(port, req, timeout)
    if why not in ("closed", "reset") or time.time() - t0 > timeout - 1:
        raise Fail("no close after the answer (%s, %.1f s): %r for %r" % (why, time.time() - t0, data[:300], req[:300]))
    st = check_response(data, why, req)
    if want is not None and st != want or not 400 <= st < 600:
        raise Fail("status %d, expected %s: %r for %r" % (st, want, data[:300], req[:300]))
    n = len(re.findall(rb"HTTP/1\.[01] \d\d\d ", data))
    if n != 1:
        raise Fail("%d status lines: %r for %r" % (n, data[:600], req[:300]))
    head = data.partition(b"\r\n\r\n")[0].lower()
    if b"connection: close" not in head:
        raise Fail("no 'Connection: close' with the error: %r" % data[:300])
    return st


def one_framing(rng, port, method, path, body, stats):
    """A request with a framing error somewhere, then a valid request behind it on the same
    connection: the error is answered, the request behind it never runs."""
    pre = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    if rng.random() < 0.25:
        _, line, want = rng.choice(REQUEST_LINES)
        pre = line + "\r\nHost: 127.0.0.1\r\n"
        extra, payload = [], b""
    else:
        _, extra, payload, want = rng.choice(FRAMING)
        if rng.random() < 0.5 and "Transfer-Encoding: chunked" not in extra:
            payload = body
    if rng.random() < 0.3:  # a valid request before it, on the same connection
        pre = (f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") + pre
        want = None
    head = pre + "".join(h + "\r\n" for h in extra) + "\r\n"
    tail = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    req = head.encode("latin-1") + payload + tail
    data, why = exchange(port, req, 10)
    if b'"object":"list"' in data:
        raise Fail("the request behind a framing error ran: %r for %r" % (data[-300:], req[:300]))
    if why not in ("closed", "reset"):
        raise Fail("no close after a framing error (%s): %r for %r" % (why, data[:300], req[:300]))
    starts = [m.start() for m in re.finditer(rb"HTTP/1\.[01] \d\d\d ", data)]
    last = starts[-1] if starts else -1
    if last < 0:
        raise Fail("no answer to a framing error: %r" % req[:300])
    st = check_response(data[last:], why, req)
    if not 400 <= st < 600:
        raise Fail("status %d for a framing error: %r for %r" % (st, data[:300], req[:300]))
    stats["framing"] = stats.get("framing", 0) + 1


def cases(port):
    """The framing cases one by one (ok/not ok lines), then keep-alive and pipelining that
    must work. Returns the number of failures."""
    failed = 0

    def run(name, fn):
        nonlocal failed
        try:
            fn()
            print("ok - framing: %s" % name)
        except (Fail, OSError, ValueError) as e:
            failed += 1
            print("not ok - framing: %s: %s" % (name, e))

    for name, extra, payload, want in FRAMING:
        req = ("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
               "".join(h + "\r\n" for h in extra) + "\r\n").encode("latin-1") + payload
        # a valid request behind it must not run
        req += b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        run(name, lambda req=req, want=want: check_framing(port, req, want))
    for name, line, want in REQUEST_LINES:
        req = (line + "\r\nHost: 127.0.0.1\r\n\r\n").encode("latin-1")
        run(name, lambda req=req, want=want: check_framing(port, req, want))

    run(NO_HOST[0], lambda: check_framing(port, NO_HOST[1], NO_HOST[2]))
    body = b'{"prompt": "hi", "max_tokens": 2}'

    def pipelined():
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7]) for i in range(0, len(body), 7))
        req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body) +
               b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n" + chunked + b"0\r\nX-Trailer: 1\r\n\r\n" +
               b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data, why = exchange(port, req)
        n = data.count(b"HTTP/1.1 200 ")
        if n != 3 or why != "closed":
            raise Fail("%d 200s (%s): %r" % (n, why, data[:600]))

    def keep_alive():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            for i in range(3):  # byte by byte, then whole, on one connection
                req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                if i == 0:
                    for b in range(len(req)):
                        s.sendall(req[b:b + 1])
                else:
                    s.sendall(req)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += s.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                n = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")][0].split(b":")[1])
                while len(rest) < n:
                    rest += s.recv(65536)
                if not head.startswith(b"HTTP/1.1 200 "):
                    raise Fail("request %d on the connection: %r" % (i, head))
        finally:
            s.close()

    def http10():
        data, why = exchange(port, b"GET /health HTTP/1.0\r\n\r\n")
        if not data.startswith((b"HTTP/1.1 200 ", b"HTTP/1.0 200 ")) or why != "closed":
            raise Fail("%r (%s)" % (data[:200], why))

    def half_close():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        data, why = recv_all(s, timeout=10)
        s.close()
        # a half-closed client may get its answer or a close, never a hang
        if why not in ("closed", "reset"):
            raise Fail("%r (%s)" % (data[:200], why))

    run("pipelined requests with a length, chunked with a trailer, and a close", pipelined)
    run("keep-alive: three requests on one connection, the first byte by byte", keep_alive)
    run("an HTTP/1.0 request", http10)
    run("a half-close after a request ends the connection", half_close)
    return failed


def health(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data, _ = recv_all(s, timeout=10)
    s.close()
    return data.startswith(b"HTTP/1.1 200")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", action="store_true", help="run the framing cases (ok/not ok lines) instead")
    a = ap.parse_args()
    if a.cases:
        return 1 if cases(a.port) else 0
    rng = random.Random(a.seed)
    bodies = corpus()
    stats = {"dropped": 0, "short": 0}
    n = 0
    t0 = time.time()
    try:
        while time.time() - t0 < a.seconds:
            one(rng, a.port, bodies, stats)
            n += 1
    except Fail as f:
        print("FAIL after %d requests: %s" % (n, f))
        return 1
    except OSError as e:
        print("FAIL after %d requests: %s (is the server alive?)" % (n, e))
        return 1
    ok = health(a.port)
    print("%d requests in %.0f s, by status class: %s; server healthy at the end: %s" %
          (n, time.time() - t0, dict(sorted((str(k), v) for k, v in stats.items())), ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
