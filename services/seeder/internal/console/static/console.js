// trawl console: focus a refused form's error summary, and refresh the
// live parts of a page (elements with an id and data-live) while its crawl
// runs, without reloading, so that the search box, open details and focus
// stay as they are. Without this script the page refreshes itself through
// its <noscript> meta refresh.
(function () {
  "use strict";
  // A refused form: take the keyboard and the screen reader to its errors.
  var summary = document.getElementById("error-summary");
  if (summary) { summary.focus(); }
  var secs = parseInt(document.body.getAttribute("data-refresh"), 10);
  if (!secs || !window.fetch || !window.DOMParser) { return; }
  var busy = false;
  function swap() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.text(); })
      .then(function (html) {
        var next = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live][id]").forEach(function (el) {
          var fresh = next.getElementById(el.id);
          if (!fresh) { return; }
          var open = {};
          el.querySelectorAll("details").forEach(function (d, i) { open[i] = d.open; });
          el.innerHTML = fresh.innerHTML;
          el.querySelectorAll("details").forEach(function (d, i) { if (i in open) { d.open = open[i]; } });
        });
        if (!next.body.hasAttribute("data-refresh")) {
          var note = document.getElementById("live-note");
          if (note) { note.textContent = "The crawl is not running: refresh stopped."; }
          window.clearInterval(timer);
        }
      })
      .catch(function () { /* keep the page as it is; try again later */ })
      .then(function () { busy = false; });
  }
  var timer = window.setInterval(swap, secs * 1000);
}());
