// portalq console: live overview (server-sent events) and "select all" on the job list.
// No inline script anywhere (Content-Security-Policy: script-src 'self').
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var live = document.querySelector("[data-live]");
  if (live && window.EventSource) {
    var state = document.getElementById("live-state");
    var source = new EventSource(live.getAttribute("data-live"));
    var shown = function (text, on) {
      if (state) { state.textContent = text; state.className = on ? "live-state" : "live-state off"; }
    };
    source.addEventListener("open", function () { shown("live", true); });
    source.addEventListener("overview", function (event) {
      live.innerHTML = event.data;  // server-rendered, autoescaped fragment
      shown("live", true);
    });
    source.addEventListener("signed-out", function () {
      source.close();
      window.location.reload();  // the server sends this page to the sign-in form
    });
    source.addEventListener("error", function () {
      if (source.readyState !== EventSource.CLOSED) { shown("reconnecting…", false); return; }
      // the browser gave the stream up: the console refused it (a session that ended while
      // the stream was away) or answered something else. A refused session goes to the
      // sign-in form; anything else says so rather than showing old figures as live.
      shown("stopped: reload the page", false);
      fetch(live.getAttribute("data-check"), {credentials: "same-origin"}).then(function (r) {
        if (r.status === 401) { window.location.reload(); }
      });
    });
  }
  // instants: the server writes UTC (and the portal's time where it matters); the
  // viewer's own time zone is the browser's, so it is added here
  document.querySelectorAll("time[data-local]").forEach(function (t) {
    var at = new Date(t.getAttribute("datetime"));
    if (isNaN(at.getTime())) { return; }
    var local = document.createElement("span");
    local.className = "local";
    local.textContent = " · " + at.toLocaleString(undefined, {month: "short", day: "numeric",
      hour: "2-digit", minute: "2-digit", timeZoneName: "short"}) + " your time";
    t.after(local);
  });
  // a link into the console with an anchor (a mail's .../jobs/7#approve), signed out: the
  // browser keeps the anchor through the redirect to the sign-in page, but never sends it;
  // it is added to where the sign-in goes next, so the page opens at the anchor
  var next = document.querySelector("form[action='/login'] input[name=next]");
  if (next && next.value && window.location.hash && next.value.indexOf("#") < 0) {
    next.value += window.location.hash;
    var sso = document.getElementById("sso");
    if (sso) { sso.href += encodeURIComponent(window.location.hash); }
  }
  var all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll("input.pick").forEach(function (box) { box.checked = all.checked; });
    });
  }
});
