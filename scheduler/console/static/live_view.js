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
      canvas.setAttribute("data-latencies", latencies.join(","));
      say("live: " + frame.url);
    });
  });
  source.addEventListener("ended", function () {
    source.close();
    say("the job's browser is closed");
    canvas.setAttribute("data-ended", "1");
  });
  source.addEventListener("signed-out", function () { source.close(); say("signed out"); });
});
