// portalq console: live overview (server-sent events) and "select all" on the job list.
// No inline script anywhere (Content-Security-Policy: script-src 'self').
"use strict";
// instants: the server writes UTC (and the portal's time where it matters); the viewer's
// own time zone is the browser's, so it is added here (to a part swapped in live, too)
function localTimes(root) {
  root.querySelectorAll("time[data-local]").forEach(function (t) {
    var at = new Date(t.getAttribute("datetime"));
    if (isNaN(at.getTime())) { return; }
    var local = document.createElement("span");
    local.className = "local";
    local.textContent = " · " + at.toLocaleString(undefined, {month: "short", day: "numeric",
      hour: "2-digit", minute: "2-digit", timeZoneName: "short"}) + " your time";
    t.after(local);
  });
}

// what needs a person, live on every page: the navigation's count follows the server's,
// and a page listing the items ("Needs you", the overview) fetches its own list again
// when the count moves -- unless someone is typing in it (then at the next change)
function needsFollower() {
  var count = document.getElementById("needs-you-count");
  var shown = count ? count.textContent : null;
  var fetching = false;
  function busy(section) {
    if (section.contains(document.activeElement) && document.activeElement !== document.body) {
      return true;
    }
    return Array.prototype.some.call(section.querySelectorAll("input, textarea"), function (f) {
      return f.type !== "hidden" && f.type !== "checkbox" && f.type !== "radio" && f.value !== "";
    });
  }
  return function (label) {
    if (!count) { return; }
    count.textContent = label;
    count.className = label === "0" ? "count zero" : "count";
    var section = document.getElementById("needs");
    if (!section || label === shown || fetching || busy(section)) { return; }
    fetching = true;
    fetch(window.location.href, {credentials: "same-origin"}).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      fetching = false;
      var fresh = html && new DOMParser().parseFromString(html, "text/html").getElementById("needs");
      var now = document.getElementById("needs");
      if (!fresh || !now || busy(now)) { return; }
      now.replaceWith(fresh);
      localTimes(fresh);
      shown = label;
    }, function () { fetching = false; });
  };
}

document.addEventListener("DOMContentLoaded", function () {
  var live = document.querySelector("[data-live]");
  var needs = needsFollower();
  if (!live && window.EventSource && document.getElementById("needs-you-count")) {
    var counts = new EventSource("/events?only=needs");
    counts.addEventListener("needs", function (event) { needs(event.data); });
    counts.addEventListener("signed-out", function () { counts.close(); });
  }
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
    source.addEventListener("needs", function (event) { needs(event.data); });
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
  localTimes(document);
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
