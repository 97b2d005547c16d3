"""`evidence check`: each layer probed, quiet when all is well, a bundle when not."""

import time

import orjson
import pytest
from conftest import bundle_errors, bundles, manifest, run_evidence, write_config
from fakes import ENGINES, JSON, BlackHole, FakeServer, as_json

from evidence.capture.runner import SEAL_MARGIN_S


def completion(content: str, reasoning: str = "", finish: str = "stop") -> bytes:
    """An OpenAI chat.completion object as llama-server and vLLM return it; the reasoning
    goes in `reasoning_content`, where both engines put a reasoning model's thinking."""
    message = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning_content"] = reasoning
    return as_json(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1764449000,
            "model": "local/chat",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 14, "completion_tokens": 1024, "total_tokens": 1038},
        }
    )


@pytest.fixture
def services():
    llama = FakeServer(
        {**ENGINES["llama-server"], "/v1/chat/completions": (200, JSON, completion("ready"))}
    )
    silent = FakeServer(
        {"/v1/chat/completions": (200, JSON, completion("", reasoning="Let me think. " * 300))}
    )
    broken = FakeServer({"/health": (500, "text/plain", b"engine core died: EngineDeadError")})
    hole = BlackHole()
    yield llama, silent, broken, hole
    for s in (llama, silent, broken):
        s.close()
    hole.close()


def checks_config(tmp_path, *blocks: str) -> str:
    return str(write_config(tmp_path / "c.toml", "\n".join(blocks)))


def http(name, url, **extra) -> str:
    lines = [f'[[checks]]\nname = "{name}"\nkind = "http"\nurl = "{url}"\ntimeout_s = 1']
    lines += [f'{k} = "{v}"' for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def chat(name, url) -> str:
    return (
        f'[[checks]]\nname = "{name}"\nkind = "completion"\nurl = "{url}/v1/chat/completions"\n'
        'model = "local/chat"\ntimeout_s = 5\n'
    )


def test_all_well_is_quiet_and_captures_nothing(services, tmp_path):
    llama, *_ = services
    config = checks_config(
        tmp_path,
        http("health", f"{llama.url}/health", json_field="status", json_value="ok"),
        chat("gateway", llama.url),
        '[[checks]]\nname = "fork"\nkind = "command"\ncommand = "true"\ntimeout_s = 5\n',
        f'[[checks]]\nname = "port"\nkind = "tcp"\nurl = "{llama.url}"\ntimeout_s = 1\n',
    )
    result = run_evidence("check", "--archive", str(tmp_path / "a"), "--config", config)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
    assert bundles(tmp_path / "a") == []
    assert ("POST", "/v1/chat/completions") in llama.requests


def test_an_empty_completion_is_a_failure_with_a_bundle(services, tmp_path):
    llama, silent, *_ = services
    config = checks_config(
        tmp_path, http("health", f"{llama.url}/health"), chat("thinker", silent.url)
    )
    result = run_evidence(
        "check", "--archive", str(tmp_path / "a"), "--config", config, "--window", "0"
    )
    assert result.returncode == 9, result.stderr
    (bundle,) = bundles(tmp_path / "a")
    assert result.stdout.strip() == str(bundle)
    assert "thinker" in result.stderr and "content is empty" in result.stderr
    assert bundle_errors(bundle) == []
    m = manifest(bundle)
    assert m["trigger"]["kind"] == "healthcheck" and m["trigger"]["name"] == "thinker"
    health = orjson.loads((bundle / "health.json").read_bytes())["checks"]
    by_name = {c["name"]: c for c in health}
    assert by_name["health"]["ok"] is True  # the contrast: the health endpoint was fine
    answer = by_name["thinker"]["answer"]
    assert answer["http_status"] == 200 and answer["finish_reason"] == "stop"
    assert answer["content_chars"] == 0 and answer["reasoning_chars"] == len("Let me think. " * 300)
    assert "reasoning ate the budget" in by_name["thinker"]["reason"]


def test_a_500_and_a_hung_endpoint_each_fail_within_their_timeout(services, tmp_path):
    llama, _, broken, hole = services
    config = checks_config(
        tmp_path,
        http("core", f"{broken.url}/health"),
        http("wedged", f"{hole.url}/health"),
        f'[[checks]]\nname = "port"\nkind = "tcp"\nurl = "{hole.url}"\ntimeout_s = 1\n',
    )
    start = time.monotonic()
    result = run_evidence(
        "check", "--archive", str(tmp_path / "a"), "--config", config, "--window", "0", "--json"
    )
    elapsed = time.monotonic() - start
    assert result.returncode == 9
    assert elapsed < 1 + 1 + SEAL_MARGIN_S  # the checks side by side, then the snapshot
    report = orjson.loads(result.stdout)
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["core"]["status"] == "failed" and "HTTP 500" in by_name["core"]["reason"]
    assert "EngineDeadError" in by_name["core"]["answer"]["body"]
    assert by_name["wedged"]["status"] == "timeout"
    # The port accepts while the application is dead: tcp passes, http does not.
    assert by_name["port"]["ok"] is True
    (bundle,) = bundles(tmp_path / "a")
    assert report["bundle"] == str(bundle) and report["ok"] is False
    assert manifest(bundle)["trigger"]["name"] == "core"


def test_a_command_that_fails_or_hangs(tmp_path):
    config = checks_config(
        tmp_path,
        '[[checks]]\nname = "false"\nkind = "command"\ncommand = "false"\n',
        '[[checks]]\nname = "stuck"\nkind = "command"\ncommand = "sleep 30"\ntimeout_s = 0.5\n',
    )
    result = run_evidence(
        "check", "--archive", str(tmp_path / "a"), "--config", config, "--window", "0", "--json"
    )
    by_name = {c["name"]: c for c in orjson.loads(result.stdout)["checks"]}
    assert by_name["false"]["status"] == "failed" and by_name["false"]["answer"]["exit_code"] == 1
    assert by_name["stuck"]["status"] == "timeout"
    assert result.returncode == 9


def test_no_checks_configured_is_a_usage_error(tmp_path):
    result = run_evidence("check", "--config", checks_config(tmp_path, "window_s = 1\n"))
    assert result.returncode == 2 and "no [[checks]] configured" in result.stderr


def test_a_mistyped_url_is_refused_without_printing_its_password(tmp_path):
    config = write_config(
        tmp_path / "c.toml",
        '[[checks]]\nname = "h"\nkind = "http"\nurl = "htp://admin:Typo-Pw-5531@127.0.0.1:8080/"\n',
    )
    result = run_evidence("check", "--archive", str(tmp_path), "--config", str(config))
    assert result.returncode == 2 and "not an http(s) URL" in result.stderr
    assert "Typo-Pw-5531" not in result.stderr + result.stdout
