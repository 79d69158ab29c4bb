"""The server keeps the embedding model loaded across requests."""

from __future__ import annotations

from typing import Any

import pytest

from funes.storage.repo import Repository


def test_embedding_model_is_loaded_once(memory: Repository, settings: Any, start_server: Any,
                                        run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = start_server(memory)
    monkeypatch.setenv("FUNES_SERVE", "use")
    for query in ("streaming parser", "why was startup slow", "relative import fix"):
        result = run("--memory", str(memory.path), "--format", "json", "recall", query)
        assert result.exit_code == 0
        assert '"vector"' in result.stdout  # the vector signal ran: the model was used
    status = server.status(settings)
    assert status.requests == {"recall": 3}
    assert status.models == ["minilm-l6-v2"]
    assert status.embedder_loads == 1  # warm-up loaded it; three recalls reused it
