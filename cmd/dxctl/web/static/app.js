// dxctl web: the overview's auto-refresh (with a pause button). Everything else works without JS.
"use strict";
(function () {
  var btn = document.getElementById("pause");
  if (!btn) return;
  var every = parseInt(btn.getAttribute("data-refresh"), 10) || 5000;
  var state = document.getElementById("refresh-state");
  var paused = window.localStorage && localStorage.getItem("dxctl-web-paused") === "1";
  var timer = null;

  function age(ms) {
    if (ms <= 0) return "-";
    if (ms < 1000) return ms + "ms";
    return (ms / 1000).toFixed(1) + "s";
  }
  function field(obj, path) {
    return path.split(".").reduce(function (o, k) { return o == null ? undefined : o[k]; }, obj);
  }
  // workerTags redraws the per-tag worker table (tags come and go between refreshes).
  function workerTags(tags) {
    var body = document.querySelector("#worker-tags tbody");
    if (!body) return;
    var rows = tags.map(function (t) {
      var tr = document.createElement("tr");
      var cells = [t.tag, t.ready, t.session, t.delayed, t.locked];
      cells.forEach(function (v, i) {
        var td = document.createElement("td");
        if (i === 0 && v === "") {
          var it = document.createElement("i");
          it.textContent = "untagged";
          td.appendChild(it);
        } else {
          td.textContent = String(v);
        }
        tr.appendChild(td);
      });
      return tr;
    });
    if (rows.length === 0) {
      var tr = document.createElement("tr"), td = document.createElement("td");
      td.colSpan = 5;
      td.textContent = "no queued items";
      tr.appendChild(td);
      rows.push(tr);
    }
    body.replaceChildren.apply(body, rows);
  }
  function refresh() {
    fetch("/api/overview", { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (o) {
        document.querySelectorAll("[data-field]").forEach(function (el) {
          var v = field(o, el.getAttribute("data-field"));
          if (v === undefined) return;
          el.textContent = el.getAttribute("data-format") === "age" ? age(v) : String(v);
        });
        workerTags(o.queues.worker_tags || []);
        var chart = document.getElementById("chart");
        chart.src = chart.getAttribute("data-src") + "&t=" + Date.now();
        state.textContent = "refreshed " + new Date().toLocaleTimeString();
      })
      .catch(function (e) { state.textContent = "refresh failed: " + e.message; });
  }
  function show() {
    btn.textContent = paused ? "Resume auto-refresh" : "Pause auto-refresh";
    if (paused) state.textContent = "paused";
  }
  function schedule() {
    if (timer) clearInterval(timer);
    timer = paused ? null : setInterval(refresh, every);
  }
  btn.addEventListener("click", function () {
    paused = !paused;
    if (window.localStorage) localStorage.setItem("dxctl-web-paused", paused ? "1" : "0");
    show();
    schedule();
    if (!paused) refresh();
  });
  show();
  schedule();
})();
