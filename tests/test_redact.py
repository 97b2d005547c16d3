"""Secrets never reach disk: unit cases, then real processes whose command lines carry them."""

import json
import subprocess
import sys
import time

import pytest
from conftest import bundles, run_evidence, write_config

from evidence.capture.redact import MARK, redact_argv, redact_text, scrub

SECRETS = [
    "sk-proj-4f9aB3kLmN0pQrStUvWx",
    "hf_AbCdEfGhIjKlMnOpQrSt",
    "hunter2-db-password",
    "ghp_0123456789abcdefghijABCDEFGHIJ",
    "querytok3n-value",
    "bearer-token-value-123",
]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("curl -H 'Authorization: Bearer abc.def.ghi1234'", "abc.def.ghi1234"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
        ("OPENAI_API_KEY=sk-live-abcdefghijklmnop", "sk-live-abcdefghijklmnop"),
        ("export HF_TOKEN=hf_abcdefghijklmnopqrst", "hf_abcdefghijklmnopqrst"),
        ("postgres://llm:s3cr3t@127.0.0.1:5432/db", "s3cr3t"),
        ("GET /v1/models?api_key=abc123xyz&x=1", "abc123xyz"),
        ("GET /stream?token=t0ken-value", "t0ken-value"),
        ('{"password": "pw-in-json"}', "pw-in-json"),
        ("db password=1234", "1234"),
        ("aws AKIAABCDEFGHIJKLMNOP here", "AKIAABCDEFGHIJKLMNOP"),
    ],
)
def test_text_secrets_are_removed(text, secret):
    out = redact_text(text)
    assert secret not in out and MARK in out


def test_counts_named_like_tokens_are_evidence_not_secrets():
    line = "slot update: n_tokens = 4096, max_tokens: 256, prompt_tokens=12, n_token=7"
    assert redact_text(line) == line


def test_argv_flag_values_and_equals_forms():
    argv = [
        "llama-server",
        "--api-key",
        "k1",
        "--hf-token=hf_x",
        "--ctx-size",
        "8192",
        "--password",
        "p",
        "--ssl-key-file",
        "/etc/k.pem",
        "--cache-type-k",
        "q8_0",
    ]
    assert redact_argv(argv) == [
        "llama-server",
        "--api-key",
        MARK,
        f"--hf-token={MARK}",
        "--ctx-size",
        "8192",
        "--password",
        MARK,
        "--ssl-key-file",
        "/etc/k.pem",
        "--cache-type-k",
        "q8_0",
    ]


def test_scrub_walks_records_and_treats_cmdline_as_argv():
    record = {
        "processes": [{"cmdline": ["x", "--token", "abc"], "name": "x"}],
        "lines": ["Authorization: Bearer zzzzzzzzzz"],
    }
    out = scrub(record)
    assert out["processes"][0]["cmdline"] == ["x", "--token", MARK]
    assert "zzzzzzzzzz" not in out["lines"][0]


def test_real_processes_with_secrets_never_reach_the_bundle(tmp_path):
    log = tmp_path / "gateway.log"
    log.write_text(
        f"POST /v1/chat Authorization: Bearer {SECRETS[5]}\n"
        f"upstream http://u:{SECRETS[2]}@127.0.0.1:9\n"
    )
    config = write_config(tmp_path / "c.toml", f'[[logs]]\npath = "{log}"\n')
    sleeper = "import time; time.sleep(60)"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", sleeper, "--api-key", SECRETS[0], f"--hf-token={SECRETS[1]}"]
        ),
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                sleeper,
                f"password={SECRETS[2]}",
                f"https://x.invalid/?token={SECRETS[4]}",
                SECRETS[3],
            ]
        ),
    ]
    try:
        time.sleep(0.2)
        result = run_evidence(
            "capture", "--archive", str(tmp_path / "a"), "--window", "1", "--config", str(config)
        )
        assert result.returncode == 0, result.stderr
    finally:
        for p in procs:
            p.kill()
            p.wait()
    (bundle,) = bundles(tmp_path / "a")
    everything = b"".join(f.read_bytes() for f in bundle.iterdir())
    for secret in SECRETS:
        assert secret.encode() not in everything, secret
    # the processes are still there, with the flag visible and the value gone
    text = (bundle / "processes.json").read_text()
    assert f'"--api-key","{MARK}"' in text
    assert "Authorization: " + MARK in (bundle / "logs.json").read_text()


def test_trigger_name_and_detail_are_redacted_before_they_become_a_path(tmp_path):
    secret = "sk-live-0123456789abcdef"
    result = run_evidence(
        "capture",
        "--archive",
        str(tmp_path),
        "--window",
        "0",
        "--json",
        "--trigger",
        f"alert:{secret}",
        "--detail",
        f"curl -H 'Authorization: Bearer {secret}' token=t0psecret",
    )
    assert result.returncode == 0, result.stderr
    assert secret not in result.stdout and "t0psecret" not in result.stdout
    (bundle,) = bundles(tmp_path)
    assert secret not in str(bundle)
    assert secret.encode() not in (bundle / "manifest.json").read_bytes()


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('bash -c "llama-server --api-key SECRETAAA --port 8080"', "SECRETAAA"),
        ("cmd: /opt/llama-server --hf-token hf_x1 -m /m.gguf", "hf_x1"),
        ("--password hunter22 --secret-key s3cr3t", "s3cr3t"),
        ("redis://:redispw@127.0.0.1:6379/0", "redispw"),
        ("TELEGRAM_BOT_TOKEN=123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", "123456789:AAH"),
    ],
)
def test_secrets_inside_free_text(text, secret):
    assert secret not in redact_text(text)


def test_a_value_under_a_key_that_names_a_secret_goes_whole():
    record = {
        "labels": {"password": "hunter2", "X-Api-Key": "k-7f3a", "auth": "plain"},
        "nested": [{"db_secret": "s3cr3t", "session_token": "abc"}],
        # Readings whose names merely contain the word stay readable.
        "sglang:token_usage": "0.52",
        "max_total_num_tokens": 4096,
        "author": "bob",
    }
    out = scrub(record)
    assert out["labels"] == {"password": MARK, "X-Api-Key": MARK, "auth": MARK}
    assert out["nested"] == [{"db_secret": MARK, "session_token": MARK}]
    assert out["sglang:token_usage"] == "0.52" and out["max_total_num_tokens"] == 4096
    assert out["author"] == "bob"


@pytest.mark.parametrize(
    ("argv", "secret"),
    [
        (["bash", "-c", "MY_PASS=envpass-1 llama-server --port 8080"], "envpass-1"),
        (["exporter", "--pass", "flagpass-2"], "flagpass-2"),
        (["gateway", "--db-pass=eqpass-3"], "eqpass-3"),
        (["sshpass", "-p", "sshpass-4", "ssh", "-p", "2222", "gpu@box"], "sshpass-4"),
        (["mysql", "-uroot", "-pmysqlpw-5", "llm"], "mysqlpw-5"),
        (["curl", "-u", "admin:curlpw-6", "http://127.0.0.1:9090"], "curlpw-6"),
        (["bash", "-c", "curl -u admin:curlpw-7 http://x"], "curlpw-7"),
        (["psql", "postgresql://app:p@ss@w0rd-8@db:5432/llm"], "w0rd-8"),
        (["bash", "-c", "curl -H 'Cookie: session=cookie-9' http://x"], "cookie-9"),
        (["redis-cli", "-a", "redispw-10", "ping"], "redispw-10"),
    ],
)
def test_command_lines_the_issue_found_leaking(argv, secret):
    assert not any(secret in a for a in redact_argv(argv))


def test_ports_and_uids_after_short_flags_are_not_passwords():
    argv = ["sshpass", "-p", "pw", "ssh", "-p", "2222", "gpu@box"]
    assert redact_argv(argv)[-3:] == ["-p", "2222", "gpu@box"]
    for line in (
        "llama-server -p 8080 --port 8081",
        "docker run -p 8080:8080 -u 1000:1000 img",
        "python -u server.py",
        "mysql -uroot -p llm",  # -p then a space prompts; llm is the database
        "llama-server --no-auth --port 8080",
    ):
        assert redact_text(line) == line
        assert redact_argv(line.split()) == line.split()


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("exec gateway --db-pass dbpass-11 --port 80", "dbpass-11"),
        ("GET / Cookie: session=cookie-12; theme=dark", "cookie-12"),
        ("+ curl -u admin:curlpw-13 http://x", "curlpw-13"),
        ('{"password": "esc\\"aped-tail-14", "n_ctx": 4096}', "aped-tail-14"),
    ],
)
def test_log_lines_the_issue_found_leaking(line, secret):
    out = redact_text(line)
    assert secret not in out and MARK in out


def test_an_escaped_quote_keeps_the_json_valid():
    out = redact_text('{"password": "a\\"b-tail", "n_ctx": 4096}')
    assert json.loads(out) == {"password": MARK, "n_ctx": 4096}


def test_keys_that_name_a_secret_by_word():
    record = {
        "passphrase": "p1",
        "session_cookie": "c1",
        "hfToken": "t1",
        "db": {"pass": "p2", "port": 5432},
        "auth": {"basic": "b1", "enabled": True},
        "secret_value": "s1",
        "password": 123456,
        "use_auth": False,
        "eos_token": "</s>",
        "token_usage": "0.52",
        "group_key": "g",
        "cache_key": "k",
    }
    out = scrub(record)
    assert out["passphrase"] == out["session_cookie"] == out["hfToken"] == MARK
    assert out["db"] == {"pass": MARK, "port": 5432} and out["password"] == MARK
    assert out["auth"] == {"basic": MARK, "enabled": True} and out["secret_value"] == MARK
    assert out["use_auth"] is False and out["eos_token"] == "</s>"
    assert out["token_usage"] == "0.52" and out["group_key"] == "g" and out["cache_key"] == "k"
