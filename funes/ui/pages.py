"""The pages of `funes ui`: each reads the library (funes.api) and renders one template.

Every page is whole HTML from the server: it works with JavaScript off, and its forms are plain
GET forms (filters, search) or POST forms behind a confirmation page (forget, push, sync).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from funes import api
from funes.api import overview
from funes.api import security as sec
from funes.errors import FunesError, UsageError
from funes.ui import text
from funes.ui.app import Pages, Timer

#: Sessions one timeline page lists.
TIMELINE_PAGE = 50
#: Recall hits a search page shows at most.
MAX_HITS = 50


def _int(request: Request, name: str, default: int | None, low: int = 0,
         high: int = 1 << 30) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise UsageError(f"{name} must be between {low} and {high}, not {value}")
    return value


def _multi(request: Request, name: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in request.query_params.getlist(name) if v.strip())


def _query(request: Request, **changes: Any) -> str:
    """This page's query string with some parameters changed (None: removed)."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in changes]
    params += [(k, str(v)) for k, v in changes.items() if v is not None]
    return urlencode(params)


class Handlers:
    """The route handlers (synchronous: Starlette runs them in its thread pool)."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages

    def _page(self, request: Request, body: Callable[[Timer], Response]) -> Response:
        timer = Timer()
        try:
            return body(timer)
        except FunesError as exc:
            return self.pages.error(request, timer, exc)

    # -- timeline ----------------------------------------------------------------------------

    def timeline(self, request: Request) -> Response:
        """`/`: sessions by day, newest first, with filters."""

        def body(timer: Timer) -> Response:
            choice = self.pages.choice(request, timer)
            project, harness = _multi(request, "project"), _multi(request, "agent")
            since = request.query_params.get("since") or None
            offset = _int(request, "offset", 0) or 0
            origin = request.query_params.get("origin") or None
            with self.pages.library(timer):
                origins = overview.session_origins(choice.repo)
                only = None
                if origin is not None:
                    only = {sid for sid, found in origins.items()
                            if any(o.label == origin for o in found)}
                page = api.sessions(choice.repo, project=project, harness=harness,
                                    since=since, limit=TIMELINE_PAGE, offset=offset,
                                    only=only)
            labels = sorted({o.label for found in origins.values() for o in found})
            days: dict[str, list[api.SessionInfo]] = {}
            for info in page.sessions:
                days.setdefault(text.day_of(info.end or info.start), []).append(info)
            more = (_query(request, offset=page.next_offset)
                    if page.next_offset is not None else None)
            return self.pages.render(
                request, timer, "timeline.html", title="Timeline", choice=choice, page=page,
                days=days, project=" ".join(project), agent=" ".join(harness),
                since=since or "", harnesses=api.HARNESSES, more=more, live=True,
                origins=origins, origin_labels=labels, origin=origin or "",
                notice=request.query_params.get("done"))

        return self._page(request, body)

    # -- search ------------------------------------------------------------------------------

    def search(self, request: Request) -> Response:
        """`/search?q=…`: the recall the agents get, with provenance and trust marks."""

        def body(timer: Timer) -> Response:
            choice = self.pages.choice(request, timer)
            q = (request.query_params.get("q") or "").strip()
            k = _int(request, "k", None, 1, MAX_HITS)  # None: the memory's recall.k
            harness, project = _multi(request, "agent"), _multi(request, "project")
            since = request.query_params.get("since") or None
            result = None
            if q:
                req = api.RecallRequest(q, k=k, harness=harness, project=project, since=since)
                result = self.pages.call(timer, api.recall, self.pages.state.settings,
                                         choice.repo, req)
            return self.pages.render(
                request, timer, "search.html", title=f"Search: {q}" if q else "Search",
                choice=choice, q=q, k=k, agent=" ".join(harness), project=" ".join(project),
                since=since or "", harnesses=api.HARNESSES, result=result,
                terms=text.terms_of(q))

        return self._page(request, body)

    # -- session -----------------------------------------------------------------------------

    def session(self, request: Request) -> Response:
        """`/session/<id>`: the turns in order, the hit marked, the commits it produced."""

        def body(timer: Timer) -> Response:
            choice = self.pages.choice(request, timer)
            sid = request.path_params["session_id"]
            first = _int(request, "from", None, -(1 << 30))
            hit = request.query_params.get("turn") or None
            with self.pages.library(timer):
                if hit is not None and first is None:  # start the page a little before it
                    found = [t for t in api.get(choice.repo, sid, hit) if t.target]
                    first = max(0, found[0].seq - 2) if found else None
                page = api.get_range(choice.repo, sid, first, None)
                commits = overview.session_commits(choice.repo, sid)
            q = request.query_params.get("q")
            later = (_query(request, **{"from": page.next_seq})
                     if page.next_seq is not None else None)
            earlier = None
            if page.first > page.session.first_seq:
                earlier = _query(request, **{"from": max(page.session.first_seq,
                                                         page.first - 20)})
            return self.pages.render(
                request, timer, "session.html", title=f"Session {sid}", choice=choice,
                page=page, sid=sid, hit=hit, terms=text.terms_of(q), commits=commits,
                later=later, earlier=earlier)

        return self._page(request, body)

    def forget(self, request: Request) -> Response:
        """`/session/<id>/forget`: GET asks for confirmation, POST (guarded) forgets."""

        def body(timer: Timer) -> Response:
            choice = self.pages.choice(request, timer)
            sid = request.path_params["session_id"]
            if request.method == "POST":
                result = self.pages.call(timer, sec.forget, choice.repo, session=sid)
                done = (f"forgot {len(result.chunks)} chunk(s) of session {sid}"
                        if result.chunks else f"nothing of session {sid} was left to forget")
                target = "/?" + urlencode({"done": done, **_memory_param(request)})
                return RedirectResponse(target, status_code=303)
            preview = self.pages.call(timer, sec.forget, choice.repo, session=sid,
                                      dry_run=True)
            return self.pages.render(
                request, timer, "confirm.html", title=f"Forget session {sid}?", choice=choice,
                action=_here(request), verb="Forget this session",
                what=(f"{len(preview.chunks)} chunk(s) of session {sid} will be hidden from "
                      "every recall, here and wherever the tombstone travels (push, pull)."),
                command=f"funes forget --session {sid}", back=f"/session/{sid}",
                fields={})

        return self._page(request, body)

    # -- commits -----------------------------------------------------------------------------

    def commits(self, request: Request) -> Response:
        """`/commits`: linked code commits; `?sha=` one with its turns; `?file=` its blame."""

        def body(timer: Timer) -> Response:
            choice = self.pages.choice(request, timer)
            sha = (request.query_params.get("sha") or "").strip()
            spec = (request.query_params.get("file") or "").strip()
            why = blame = page = None
            problem = None
            offset = _int(request, "offset", 0) or 0
            with self.pages.library(timer):
                try:
                    if sha:
                        why = api.why(choice.repo, sha)
                    elif spec:
                        blame = api.blame(choice.repo, spec)
                except FunesError as exc:
                    problem = exc
                page = overview.code_commits(choice.repo, limit=50, offset=offset)
            more = (_query(request, offset=page.next_offset)
                    if page.next_offset is not None else None)
            return self.pages.render(
                request, timer, "commits.html", title="Commits", choice=choice, page=page,
                why=why, blame=blame, sha=sha, spec=spec, problem=problem, more=more)

        return self._page(request, body)

    # -- memory ------------------------------------------------------------------------------

    def memory(self, request: Request) -> Response:
        """`/memory`: branches, remotes, tags, exclusions, tombstones, trust, backlog."""

        def body(timer: Timer) -> Response:
            choice = self.pages.choice(request, timer)
            settings = self.pages.state.settings
            with self.pages.library(timer):
                status = api.status(choice.repo)
                search = api.search_status(settings, choice.repo)
                tags = api.tag_list(choice.repo)
                branches = overview.branches(choice.repo)
                hidden = overview.hidden_count(choice.repo)
                keys = sec.keys_list(settings)
            return self.pages.render(
                request, timer, "memory.html", title="Memory", choice=choice, status=status,
                search=search, tags=tags, branches=branches, hidden=hidden, keys=keys,
                problems=_problems(status, search),
                notice=request.query_params.get("done"))

        return self._page(request, body)

    def remote_action(self, request: Request) -> Response:
        """`/memory/push`, `/memory/sync`: GET asks for confirmation, POST (guarded) runs it."""
        action = request.path_params["action"]

        def body(timer: Timer) -> Response:
            if action not in ("push", "sync"):
                raise UsageError(f"no action {action!r}", hint="the memory page lists them")
            choice = self.pages.choice(request, timer)
            remote = request.query_params.get("remote") or None
            if request.method == "POST":
                return self._run_remote(request, timer, choice, action, remote)
            named = remote or "the default remote"
            what = (f"Send this memory's branch to {named} (the publish gate holds back "
                    "what still looks secret)." if action == "push" else
                    f"Fetch {named}, merge its branch, and push the result.")
            return self.pages.render(
                request, timer, "confirm.html", title=f"{action.title()} {named}?",
                choice=choice, action=_here(request),
                verb=f"{action.title()} now", what=what, back="/memory",
                command=f"funes {action}" + (f" {remote}" if remote else ""), fields={})

        return self._page(request, body)

    def _run_remote(self, request: Request, timer: Timer, choice: api.MemoryChoice,
                    action: str, remote: str | None) -> Response:
        held: list[Any] = []
        with self.pages.library(timer):
            if action == "push":
                pushed = api.push(choice.repo, remote)
                held = list(pushed.held)
                done = ("already up to date" if pushed.up_to_date else
                        f"pushed {pushed.commits} commit(s) to {pushed.remote}")
            else:
                synced = api.sync(choice.repo, remote)
                held = list(synced.pushed.held) if synced.pushed else []
                done = f"synced with {synced.remote}"
        if held:
            done += f"; {len(held)} chunk(s) still look secret and were held back"
        target = "/memory?" + urlencode({"done": done, **_memory_param(request)})
        return RedirectResponse(target, status_code=303)


def _here(request: Request) -> str:
    """This page's own address (a confirmation form posts back to it)."""
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def _memory_param(request: Request) -> dict[str, str]:
    memory = request.query_params.get("memory")
    return {"memory": memory} if memory else {}


def _problems(status: api.StatusResult, search: api.SearchStatus) -> list[tuple[str, str]]:
    """What needs doing, each with the one command that does it."""
    out: list[tuple[str, str]] = []
    if search.backlog:
        out.append((f"{search.backlog} chunk(s) wait for vectors (found by words only)",
                    "funes embed"))
    if status.redaction_outdated:
        out.append((f"chunks were redacted with older rules ({status.redaction_outdated})",
                    "funes scrub"))
    for r in status.remotes:
        if r.last is not None and not r.last.ok:
            how = "was incomplete" if r.last.held else "failed"
            out.append((f"the last sync with {r.name} {how}: {r.last.detail}",
                        r.last.fix or f"funes sync {r.name}"))
        if r.behind:
            out.append((f"{r.name} has {r.behind} commit(s) this memory lacks",
                        f"funes pull {r.name}"))
        if r.ahead:
            out.append((f"{r.ahead} commit(s) are not on {r.name} yet", f"funes push {r.name}"))
    return out
