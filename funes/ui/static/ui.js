// funes ui: progressive enhancement only; every page works without this file.
// The live timeline: when the memory's HEAD moves (a hook indexed a new turn), the server
// sends a `head` event and the timeline is fetched again and swapped in, without a reload.
(function () {
  "use strict";
  var live = document.body.getAttribute("data-live");
  if (!live || !window.EventSource || !window.fetch || !window.DOMParser) { return; }
  var busy = false;
  function refresh() {
    if (busy) { return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("timeline");
        var here = document.getElementById("timeline");
        if (fresh && here) {
          here.replaceWith(fresh);
          fresh.classList.add("live-new");
        }
        var status = doc.getElementById("live-status");
        var mine = document.getElementById("live-status");
        if (status && mine) { mine.textContent = status.textContent + " Updated just now."; }
        document.body.setAttribute("data-updated", String(Date.now()));
      })
      .catch(function () { /* the next event tries again */ })
      .then(function () { busy = false; });
  }
  var source = new EventSource(live);
  source.addEventListener("head", refresh);
}());
