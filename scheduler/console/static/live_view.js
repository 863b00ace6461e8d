// The live view of a running job's browser (templates/_live_view.html): its frames come as
// server-sent events (base64 JPEG) and are drawn on the canvas. Not an <img>: the console's
// Content-Security-Policy allows images from the console's own URLs only, not data: URLs;
// a bitmap made from the bytes is drawn without one. Each frame's latency (from Chromium
// taking it to it drawn here, same clock on one host) is kept in data-latencies.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var canvas = document.getElementById("live-frame");
  if (!canvas || !window.EventSource || !window.createImageBitmap) { return; }
  var status = document.getElementById("live-status");
  var latencies = [];
  var source = new EventSource(canvas.getAttribute("data-frames"));
  var say = function (text) { if (status) { status.textContent = text; } };
  source.addEventListener("frame", function (event) {
    var frame = JSON.parse(event.data);
    var raw = atob(frame.jpeg);
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) { bytes[i] = raw.charCodeAt(i); }
    createImageBitmap(new Blob([bytes], {type: "image/jpeg"})).then(function (image) {
      canvas.width = image.width;
      canvas.height = image.height;
      canvas.getContext("2d").drawImage(image, 0, 0);
      latencies.push(Math.round(Date.now() - frame.taken_at * 1000));
      if (latencies.length > 500) { latencies.shift(); }
      canvas.setAttribute("data-seq", String(frame.seq));
      canvas.setAttribute("data-page-width", String(frame.width || image.width));
      var mine = frame.holder && frame.holder === canvas.getAttribute("data-user");
      canvas.setAttribute("data-holding", mine ? "1" : "0");
      var holder = document.getElementById("live-holder");
      if (holder) {
        holder.textContent = frame.holder ? (mine ? "You hold this page: your clicks and keys go to it."
                                                  : frame.holder + " holds this page.") : "";
      }
      canvas.setAttribute("data-latencies", latencies.join(","));
      say("live: " + frame.url);
    });
  });
  source.addEventListener("ended", function () {
    source.close();
    say("the job's browser is closed");
    canvas.setAttribute("data-ended", "1");
  });
  // a takeover: the holder's clicks and keys, in order, one request each (the console
  // checks the holder, sends them to the job's browser and audits them)
  var queue = Promise.resolve();
  var send = function (event) {
    if (canvas.getAttribute("data-holding") !== "1") { return; }
    queue = queue.then(function () {
      return fetch(canvas.getAttribute("data-input"), {
        method: "POST", credentials: "same-origin", body: JSON.stringify(event),
        headers: {"content-type": "application/json",
                  "x-csrftoken": canvas.getAttribute("data-csrf")}
      }).then(function (r) { canvas.setAttribute("data-last-input", String(r.status)); });
    });
  };
  var at = function (event) {   // the page's CSS pixels under the pointer
    var box = canvas.getBoundingClientRect();
    var scale = (+canvas.getAttribute("data-page-width") || canvas.width) / box.width;
    return {x: Math.round((event.clientX - box.left) * scale),
            y: Math.round((event.clientY - box.top) * scale)};
  };
  canvas.addEventListener("mousedown", function (event) {
    var p = at(event);
    canvas.focus();
    send({kind: "mouse", type: "mousePressed", x: p.x, y: p.y});
  });
  canvas.addEventListener("mouseup", function (event) {
    var p = at(event);
    send({kind: "mouse", type: "mouseReleased", x: p.x, y: p.y});
  });
  var named = ["Enter", "Backspace", "Tab", "Escape", "Delete",
               "ArrowLeft", "ArrowUp", "ArrowRight", "ArrowDown"];
  canvas.addEventListener("keydown", function (event) {
    if (canvas.getAttribute("data-holding") !== "1") { return; }
    if (named.indexOf(event.key) >= 0) {
      send({kind: "key", key: event.key});
    } else if (event.key.length === 1 && !event.ctrlKey && !event.metaKey) {
      send({kind: "text", text: event.key});
    } else { return; }
    event.preventDefault();
  });
  source.addEventListener("signed-out", function () { source.close(); say("signed out"); });
});
