"""The README's main job: quickstart on a machine with no agent history uses the sample."""

from __future__ import annotations

from funes import api


def test_quickstart_without_history_answers_from_the_sample(settings, with_models) -> None:  # type: ignore[no-untyped-def]
    done = api.quickstart(settings, budget=600)
    assert done.sample and done.indexed.added == 19
    assert done.embedded is not None and done.embedded.remaining == 0
    assert "vector" in done.result.signals
    top = done.result.hits[0].row
    # The answer (a decision and its reason), not the question or an "Agreed, …" echoing it.
    assert top["session_id"] == "sample-0003-units" and top["role"] == "assistant"
    assert top["text"].startswith("Keep every stored value in metres")
    # running it again changes nothing and answers the same
    again = api.quickstart(settings, budget=600)
    assert again.indexed.added == 0 and again.result.hits[0].id == done.result.hits[0].id


def test_quickstart_prefers_the_users_own_history(  # type: ignore[no-untyped-def]
    settings, tmp_path, monkeypatch, with_models
) -> None:
    import json
    from dataclasses import replace

    from funes._env import settings as load

    codex = tmp_path / "codex" / "sessions" / "2026" / "11" / "01"
    codex.mkdir(parents=True)
    lines = [
        {"timestamp": "2026-11-01T10:00:00.000Z", "type": "session_meta",
         "payload": {"id": "11111111-2222-3333-4444-555555555555", "cwd": str(tmp_path),
                     "timestamp": "2026-11-01T10:00:00.000Z", "cli_version": "0.50.0"}},
        {"timestamp": "2026-11-01T10:00:01.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "we chose sqlite for the cache"}]}},
    ]
    (codex / "rollout-2026-11-01T10-00-00-11111111-2222-3333-4444-555555555555.jsonl").write_text(
        "\n".join(json.dumps(x) for x in lines) + "\n")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    s = replace(load(), cwd=tmp_path)
    done = api.quickstart(s, "which database for the cache", budget=0)
    assert not done.sample and done.indexed.added >= 1
    assert done.result.hits and "sqlite" in done.result.hits[0].row["text"]
