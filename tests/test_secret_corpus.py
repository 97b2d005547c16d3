"""The secret corpus: every shape of secret the rule families of gitleaks and detect-secrets
know, pushed through every path to disk and to stdout, then looked for everywhere.

A real capture runs with the corpus in process command lines (split as a shell would, and
whole, as a `bash -c` string), in a log file, in an engine's JSON answer (by value and by
key) and in the URLs of Prometheus, the engine and the checks (basic auth by URL). The
bundles are ingested, exported as Parquet and rendered; then the archive directory, the
database's rows, the Parquet rows, the pages and everything printed are searched for
every secret. Ordinary text (ports, model paths, counts) must survive, so the redaction
cannot pass by deleting everything.
"""

import base64
import json
import shlex
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import bundles, manifest, run_evidence, write_config
from fakes import ENGINES, LLAMACPP_PROPS

from evidence.capture.httpget import get
from evidence.capture.redact import MARK, redact_argv, redact_text, scrub
from evidence.cli.exits import Exit


def _chars(n: int, alphabet: str = "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9") -> str:
    return (alphabet * (n // len(alphabet) + 1))[:n]


PEM_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
# (shape, a line holding it, the secret that must vanish)
CORPUS: list[tuple[str, str, str]] = [
    ("aws access key id", "using AKIAZ3MSJV4WWNAB7K3Q for s3", "AKIAZ3MSJV4WWNAB7K3Q"),
    ("aws temporary key id", "id ASIAQ7RT2XW9KLMN3PQR", "ASIAQ7RT2XW9KLMN3PQR"),
    (
        "aws secret access key",
        "aws_secret_access_key = Jx9Vw2nQ8rT5yU1iO3pA7sD4fG6hK0lZ2xC8vB5n",
        "Jx9Vw2nQ8rT5yU1iO3pA7sD4fG6hK0lZ2xC8vB5n",
    ),
    (
        "aws session token",
        "AWS_SESSION_TOKEN=FwoGZXIvYXdzEBYaDH9kLmNpQrStUvWxYz",
        "FwoGZXIvYXdzEBYaDH9kLmNpQrStUvWxYz",
    ),
    ("github pat classic", f"remote ghp_{_chars(36)}", f"ghp_{_chars(36)}"),
    ("github pat fine", f"GH github_pat_11ABCDEFG0_{_chars(59)}", f"_{_chars(59)}"),
    ("github oauth", f"gho_{_chars(36)} in use", f"gho_{_chars(36)}"),
    ("gitlab pat", "token glpat-x8Rk2mNq9vLw4tYz7pHs", "glpat-x8Rk2mNq9vLw4tYz7pHs"),
    ("slack bot", "xoxb-2485918273-5938172635-Kx9mQ2vR7wT4yU8iO3pL", "Kx9mQ2vR7wT4yU8iO3pL"),
    ("slack user", f"xoxp-1234567890-0987654321-{_chars(32)}", f"0987654321-{_chars(32)}"),
    (
        "slack webhook",
        "post https://hooks.slack.com/services/T02ABCDEF/B03GHIJKL/Zx8Vq2Rm7Wt4Yu9Io1Pa3Sd5",
        "Zx8Vq2Rm7Wt4Yu9Io1Pa3Sd5",
    ),
    (
        "discord webhook",
        "https://discord.com/api/webhooks/112233445566778899/Disc-Hook-Tok-6639xyz",
        "Disc-Hook-Tok-6639xyz",
    ),
    (
        "openai key",
        "key sk-proj-Qm4Rt8Vx2Zb6Nc1Lp5Hj9Kd3Fs7Gw0Ya",
        "Qm4Rt8Vx2Zb6Nc1Lp5Hj9Kd3Fs7Gw0Ya",
    ),
    ("anthropic key", f"using sk-ant-api03-{_chars(40)}-AA", f"api03-{_chars(40)}"),
    ("stripe key", f"stripe sk_live_51Hq{_chars(24)}", f"51Hq{_chars(24)}"),
    (
        "huggingface token",
        "HF hub hf_VbNmQwErTyUiOpAsDfGhJkLzXcVbNm12",
        "hf_VbNmQwErTyUiOpAsDfGhJkLzXcVbNm12",
    ),
    ("google api key", f"maps AIzaSy{_chars(33)}", f"AIzaSy{_chars(33)}"),
    ("npm token", f"//registry/:_authToken npm_{_chars(36)}", f"npm_{_chars(36)}"),
    ("pypi token", f"upload pypi-AgEIcHlwaS5vcmc{_chars(60)}", f"AgEIcHlwaS5vcmc{_chars(60)}"),
    ("telegram bot token", f"bot 123456789:AAH{_chars(32)}", f"AAH{_chars(32)}"),
    ("sendgrid key", f"mail SG.{_chars(22)}.{_chars(43)}", f"{_chars(22)}.{_chars(43)}"),
    ("digitalocean token", f"do dop_v1_{'a1b2c3d4' * 8}", "a1b2c3d4" * 8),
    ("vault token", f"vault hvs.CAESIJ{_chars(30)}", f"CAESIJ{_chars(30)}"),
    ("groq key", f"groq gsk_{_chars(52)}", f"gsk_{_chars(52)}"),
    (
        "jwt",
        "session jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.Dq3Vx8Rk2Mn7Pw4Tz9Yb6Lc1Hj5Fs0Ga",
        "Dq3Vx8Rk2Mn7Pw4Tz9Yb6Lc1Hj5Fs0Ga",
    ),
    (
        "private key block",
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\nQyNTUxOQAAACDmQ7Kx\n"
        "-----END OPENSSH PRIVATE KEY-----",
        PEM_BODY,
    ),
    ("basic-auth url", "upstream http://admin:Wq7pLm3xTz9@10.0.0.5:8080/v1", "Wq7pLm3xTz9"),
    (
        "url password holding @",
        "psql postgresql://app:p@ss@w0rd-Rk82@db.internal:5432/llm",
        "w0rd-Rk82",
    ),
    ("redis url", "broker redis://:Redis-Url-Pw-1180@127.0.0.1:6379/0", "Redis-Url-Pw-1180"),
    (
        "mongodb srv url",
        "mongodb+srv://svc:Mongo-Srv-Pw-5561@cluster0.example.net/db",
        "Mongo-Srv-Pw-5561",
    ),
    ("bearer header", "Authorization: Bearer Zm9vYmFyYmF6cXV4MTIzNDU2", "Zm9vYmFyYmF6cXV4MTIzNDU2"),
    ("basic header", "Authorization: Basic YWRtaW46czNjcjN0LWJhc2lj", "YWRtaW46czNjcjN0LWJhc2lj"),
    (
        "proxy authorization",
        "Proxy-Authorization: Basic cHJveHk6UHJveHktUHctNTUxMA==",
        "cHJveHk6UHJveHktUHctNTUxMA==",
    ),
    ("api key header", "X-Api-Key: Hdr-Api-Key-4418", "Hdr-Api-Key-4418"),
    ("cookie header", "Cookie: session=Ck-Session-7721; theme=dark", "Ck-Session-7721"),
    ("set-cookie header", "Set-Cookie: sid=Set-Ck-Sid-3308; Path=/; HttpOnly", "Set-Ck-Sid-3308"),
    ("--password", "vllm serve --password Hunter2-vllm-77", "Hunter2-vllm-77"),
    ("--pass", "exporter --pass Pq9-passflag-31", "Pq9-passflag-31"),
    ("--db-pass", "gateway --db-pass Db-Pass-Value-5521", "Db-Pass-Value-5521"),
    ("--db-pass=", "gateway --db-pass=Db-Eq-Value-7731", "Db-Eq-Value-7731"),
    ("--api-key", "llama-server --api-key Llama-Api-Key-6620 --port 8080", "Llama-Api-Key-6620"),
    ("--hf-token=", "vllm serve --hf-token=Hf-Flag-Tok-4410", "Hf-Flag-Tok-4410"),
    ("--gradio-auth", "webui.sh --gradio-auth admin:Gradio-Auth-3376", "Gradio-Auth-3376"),
    ("--cookie", "curl --cookie sid=Curl-Cookie-9034 http://x", "Curl-Cookie-9034"),
    ("mysql -p", "mysql -uroot -pMy5ql-Root-Pw llm", "My5ql-Root-Pw"),
    ("sshpass -p", "sshpass -p Ssh-Pass-9931 ssh -p 2222 gpu@box", "Ssh-Pass-9931"),
    ("redis-cli -a", "redis-cli -h 127.0.0.1 -a Redis-Auth-4471 ping", "Redis-Auth-4471"),
    ("ldapsearch -w", "ldapsearch -x -D cn=admin -w Ldap-Bind-Pw-4490", "Ldap-Bind-Pw-4490"),
    (
        "docker login -p",
        "docker login -u bot -p Dock-Login-Pw-7712 reg.local",
        "Dock-Login-Pw-7712",
    ),
    ("curl -u", "curl -u admin:Curl-U-Pw-8812 http://127.0.0.1:9090/api", "Curl-U-Pw-8812"),
    ("curl --user", "curl --user ops:Curl-User-Pw-3391 http://127.0.0.1:9090", "Curl-User-Pw-3391"),
    ("openssl pass:", "openssl rsa -in k.pem -passin pass:Ossl-Pass-2207", "Ossl-Pass-2207"),
    ("env MY_PASS", "MY_PASS=Env-My-Pass-6610 llama-server --port 8080", "Env-My-Pass-6610"),
    ("env DB_PASSWORD", "DB_PASSWORD=Db-Password-Env-1177 python app.py", "Db-Password-Env-1177"),
    ("env PGPASSWORD", "PGPASSWORD=Pg-Env-Pw-8840 psql -h db", "Pg-Env-Pw-8840"),
    ("quoted export", 'export OPENAI_API_KEY="Quoted-Api-Key-2290"', "Quoted-Api-Key-2290"),
    ("client_secret", "client_secret=Client-Secret-3317", "Client-Secret-3317"),
    ("credentials=", "credentials=Cred-Value-6650", "Cred-Value-6650"),
    ("yaml token", "token: Yaml-Token-Value-4471", "Yaml-Token-Value-4471"),
    (
        "azure connection string",
        "DefaultEndpointsProtocol=https;AccountName=llm;AccountKey=Az+Acct/Key9Qm2Rt8Vx==;"
        "EndpointSuffix=core.windows.net",
        "Az+Acct/Key9Qm2Rt8Vx==",
    ),
    (
        "json password, escaped quote",
        '{"password": "Esc\\"aped-Tail-Pw-4402"}',
        "aped-Tail-Pw-4402",
    ),
    ("json passphrase", '{"ssl_passphrase": "Ssl-Phrase-9902"}', "Ssl-Phrase-9902"),
    ("json cookie key", '{"session_cookie": "Sess-Cookie-5530"}', "Sess-Cookie-5530"),
    ("json auth", '{"auth": "Auth-Json-Value-8801"}', "Auth-Json-Value-8801"),
    ("query token", "GET /stream?token=Query-Tok-6604&x=1", "Query-Tok-6604"),
    ("query access_token", "GET /v1/x?access_token=Access-Tok-1029", "Access-Tok-1029"),
]
# Shapes that are text, not command lines: they reach a command line whole (`curl -H
# "Authorization: Bearer X"`, `bash -c '...'`), never split into words.
TEXT_ONLY = {
    "private key block",
    "bearer header",
    "basic header",
    "proxy authorization",
    "api key header",
    "cookie header",
    "set-cookie header",
    "yaml token",
    "json password, escaped quote",
    "json passphrase",
    "json cookie key",
    "json auth",
}
# Written beside the corpus, and to be found intact wherever the corpus went.
KEPT_LINES = [
    "llama-server -m /models/Qwen3-8B-Q4_K_M.gguf -p 8080 --ctx-size 16384",
    "ssh -p 2222 gpu@box",
    "docker run -p 8081:8081 -u 1000:1000 vllm/vllm-openai",
    "slot update: n_tokens = 4096, max_tokens: 256",
]
KEPT = [
    "/models/Qwen3-8B-Q4_K_M.gguf",
    "16384",
    "2222",
    "8081:8081",
    "1000:1000",
    "4096",
]
SECRETS = [secret for _, _, secret in CORPUS]
# The passwords of the URLs the capture itself is configured with.
PROM_PW, ENGINE_PW, CHECK_PW, CHECK_TOKEN = (
    "Prom-Pw-7@31x",
    "Eng-Pw-5520",
    "Chk-Pw-4471",
    "ChkTok-88",
)


def test_the_corpus_is_large_and_each_shape_is_distinct():
    assert len(CORPUS) >= 40
    assert len({name for name, _, _ in CORPUS}) == len(CORPUS) == len(set(SECRETS))


@pytest.mark.parametrize(("name", "line", "secret"), CORPUS, ids=[c[0] for c in CORPUS])
def test_each_shape_goes_from_text_argv_and_json(name, line, secret):
    assert secret not in redact_text(line)
    assert MARK in redact_text(line)
    assert not any(secret in a for a in redact_argv(["bash", "-c", line]))
    if name not in TEXT_ONLY:
        assert not any(secret in a for a in redact_argv(_split(line)))
    as_json = json.dumps(scrub({"message": line, "nested": [{"text": line}]}))
    assert secret not in as_json


def test_ordinary_text_survives_every_path():
    for line in KEPT_LINES:
        assert redact_text(line) == line
        assert redact_argv(_split(line)) == _split(line)


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return [line]


class _AuthServer:
    """An HTTP server on loopback that answers only with the right basic-auth header,
    and records the request lines and headers it saw."""

    def __init__(self, routes: dict[str, tuple[int, str, bytes]], user: str, password: str):
        expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.seen: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server interface)
                outer.seen.append(f"{self.requestline}\n{self.headers}")
                if self.headers.get("Authorization") != expected:
                    status, ctype, body = 401, "text/plain", b"unauthorized"
                else:
                    route = self.path.split("?")[0]
                    status, ctype, body = routes.get(route, (404, "text/plain", b"not found"))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, userinfo: str, path: str = "") -> str:
        return f"http://{userinfo}@127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_url_with_userinfo_is_basic_auth_and_leaves_no_password_in_the_answer():
    server = _AuthServer({"/health": (200, "application/json", b"{}")}, "admin", "p@ss:w/rd")
    try:
        answer = get(server.url("admin:p%40ss%3Aw%2Frd", "/health"), 2.0)
        assert answer.status == "ok", answer.reason
        assert answer.url == f"http://127.0.0.1:{server.port}/health"
        assert "p%40ss" not in server.seen[0].splitlines()[0]
        wrong = get(server.url("admin:nope", "/health"), 2.0)
        assert wrong.http_status == 401 and "nope" not in json.dumps(wrong.record(100))
    finally:
        server.close()


def _prometheus_routes() -> dict[str, tuple[int, str, bytes]]:
    matrix = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {
                        "__name__": "up",
                        "instance": "http://scrape:Label-Url-Pw-3310@10.0.0.9:9100",
                        "api_key": "Label-Api-Key-2209",
                    },
                    "values": [[1764449000, "1"]],
                }
            ],
        },
    }
    build = {"status": "success", "data": {"version": "2.53.0"}}
    return {
        "/api/v1/status/buildinfo": (200, "application/json", json.dumps(build).encode()),
        "/api/v1/query_range": (200, "application/json", json.dumps(matrix).encode()),
    }


def _engine_routes() -> dict[str, tuple[int, str, bytes]]:
    props = {
        **LLAMACPP_PROPS,
        "auth": "Props-Auth-1144",
        "passphrase": "Props-Phrase-2255",
        "session_cookie": "Props-Cookie-3366",
        "hf_token": "Props-Hf-Tok-4477",
        "api_key": "Props-Api-Key-5588",
        "secret_value": "Props-Secret-Value-6699",
        "auth_settings": {"auth": {"basic": "Props-Nested-7700", "enabled": True}},
        "corpus": [line for _, line, _ in CORPUS],
    }
    return {
        **ENGINES["llama-server"],
        "/props": (200, "application/json", json.dumps(props).encode()),
    }


ROUTE_SECRETS = [
    "Label-Url-Pw-3310",
    "Label-Api-Key-2209",
    "Props-Auth-1144",
    "Props-Phrase-2255",
    "Props-Cookie-3366",
    "Props-Hf-Tok-4477",
    "Props-Api-Key-5588",
    "Props-Secret-Value-6699",
    "Props-Nested-7700",
]


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """One archive holding the corpus by every route, ingested, exported and rendered;
    with everything the commands printed."""
    tmp = tmp_path_factory.mktemp("corpus")
    prometheus = _AuthServer(_prometheus_routes(), "admin", PROM_PW)
    engine = _AuthServer(_engine_routes(), "llama", ENGINE_PW)
    log = tmp / "engine.log"
    log.write_text("\n".join([line for _, line, _ in CORPUS] + KEPT_LINES) + "\n")
    failing = shlex.join(["false", *[line for _, line, _ in CORPUS]])
    config = write_config(
        tmp / "config.toml",
        f"""
[prometheus]
url = "{prometheus.url("admin:" + PROM_PW.replace("@", "%40"))}"
lookback = "1h"

[[engines]]
kind = "llama-server"
url = "{engine.url("llama:" + ENGINE_PW)}"

[[logs]]
path = "{log}"

[[checks]]
name = "health"
kind = "http"
url = "{engine.url("llama:" + CHECK_PW, "/health?token=" + CHECK_TOKEN)}"

[[checks]]
name = "fork"
kind = "command"
command = {json.dumps(failing)}
""",
    )
    root = tmp / "archive"
    # A shell-like process per line (split as the shell would), and one holding every
    # line whole, as `bash -c` strings do; `sleep 60; :` keeps bash itself running.
    argvs = [_split(line) for name, line, _ in CORPUS if name not in TEXT_ONLY]
    argvs.append([line for _, line, _ in CORPUS])
    argvs += [_split(line) for line in KEPT_LINES]
    procs = [subprocess.Popen(["bash", "-c", "sleep 60; :", *argv]) for argv in argvs]
    common = ["--archive", str(root), "--config", str(config)]
    printed: list[str] = []
    try:
        runs = [
            run_evidence("capture", "--window", "0", "--json", *common),
            run_evidence("capture", "--window", "0", *common),
            run_evidence("check", "--json", "--window", "0", *common),
        ]
    finally:
        for p in procs:
            p.kill()
            p.wait()
        prometheus.close()
        engine.close()
    for result in runs:
        printed += [result.stdout, result.stderr]
    assert [r.returncode for r in runs] == [0, 0, Exit.CHECK_FAILED], printed
    runs = [
        run_evidence("ingest", *common),
        run_evidence("export", "--parquet", str(tmp / "parquet"), *common),
        run_evidence("report", "--index", *common),
    ]
    for result in runs:
        printed += [result.stdout, result.stderr]
        assert result.returncode == 0, result.stderr
    return {
        "root": root,
        "parquet": tmp / "parquet",
        "printed": "\n".join(printed),
        "seen": prometheus.seen + engine.seen,
    }


def _all_secrets() -> list[str]:
    return [*SECRETS, *ROUTE_SECRETS, PROM_PW, ENGINE_PW, CHECK_PW, CHECK_TOKEN]


def _rows_as_text(con: Any, relation: str) -> str:
    return json.dumps(con.execute(f"SELECT * FROM {relation}").fetchall(), default=str)


def _database_text(path: Path) -> str:
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return "\n".join(_rows_as_text(con, f'"{t}"') for t in tables)
    finally:
        con.close()


def _parquet_text(directory: Path) -> str:
    con = duckdb.connect()
    try:
        files = sorted(directory.rglob("*.parquet"))
        assert files, "the export wrote no Parquet"
        return "\n".join(_rows_as_text(con, f"read_parquet('{f}')") for f in files)
    finally:
        con.close()


def test_no_secret_anywhere_on_disk_or_printed(archive):
    root = archive["root"]
    (database,) = root.glob("*.duckdb")
    places = {
        "printed": archive["printed"],
        "database rows": _database_text(database),
        "parquet rows": _parquet_text(archive["parquet"]),
    }
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        places[str(path)] = path.read_bytes().decode("utf-8", "backslashreplace")
    for path in sorted(archive["parquet"].rglob("*.parquet")):
        places[str(path)] = path.read_bytes().decode("utf-8", "backslashreplace")
    leaks = [
        f"{secret!r} in {where}"
        for secret in _all_secrets()
        for where, text in places.items()
        if secret in text or secret.replace("@", "%40") in text
    ]
    assert not leaks, "\n".join(leaks[:20])


def test_the_redaction_kept_the_evidence(archive):
    (bundle, *_) = bundles(archive["root"])
    processes = (bundle / "processes.json").read_text()
    logs = (bundle / "logs.json").read_text()
    for text in KEPT:
        assert text in processes, text
        assert text in logs, text
    assert MARK in processes and MARK in logs
    engines = json.loads((bundle / "engines.json").read_text())
    (llama,) = engines["engines"]
    assert llama["status"] == "ok"
    props = llama["endpoints"]["/props"]
    assert props["readings"]["model_path"] == "/models/Qwen3-8B-Q4_K_M.gguf"
    assert json.loads(props["body"])["auth"] == MARK


def test_basic_auth_by_url_reached_prometheus_and_the_engine(archive):
    (bundle, *_) = bundles(archive["root"])
    assert manifest(bundle)["probes"]["prometheus"]["status"] == "ok"
    assert all("Authorization: Basic" in s for s in archive["seen"])
    request_lines = [s.splitlines()[0] for s in archive["seen"]]
    assert not any(PROM_PW in line or ENGINE_PW in line for line in request_lines)
