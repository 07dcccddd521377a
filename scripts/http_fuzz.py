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
import argparse, json, os, random, socket, sys, time

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
    if status >= 400 and b"application/json" in head.lower() and b"chunked" not in head.lower():
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
    kind = rng.randrange(10)
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
    a = ap.parse_args()
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
