// tokenplane console: draws the charts a page declares in data-chart attributes and
// shows epoch times in the browser's time zone. No inline scripts (CSP script-src 'self').
"use strict";
(function () {
  var palette = ["#3056d3", "#7a5af8", "#12a594", "#e08a00", "#c2410c", "#1d2433", "#db2777"];
  function draw(canvas) {
    var spec = JSON.parse(canvas.getAttribute("data-chart"));
    var datasets = spec.datasets.map(function (d, i) {
      var color = palette[i % palette.length];
      return { label: d.label, data: d.data, backgroundColor: color + (spec.type === "line" ? "55" : "cc"),
               borderColor: color, fill: spec.type === "line" && spec.stacked, pointRadius: 0, tension: 0.2 };
    });
    var box = document.createElement("div");  // a box of the declared height
    box.className = "chart-box";
    box.style.height = (Number(canvas.getAttribute("height")) || 240) + "px";
    canvas.parentNode.insertBefore(box, canvas);
    box.appendChild(canvas);
    var axes = { x: { stacked: !!spec.stacked }, y: { stacked: !!spec.stacked, beginAtZero: true } };
    new window.Chart(canvas, {
      type: spec.type, data: { labels: spec.labels, datasets: datasets },
      options: { animation: false, responsive: true, maintainAspectRatio: false, indexAxis: spec.horizontal ? "y" : "x",
                 scales: axes, plugins: { legend: { position: "bottom" } } }
    });
    canvas.setAttribute("data-drawn", "1");
  }
  function times() {
    document.querySelectorAll(".ts[data-ts]").forEach(function (el) {
      var ts = Number(el.getAttribute("data-ts"));
      if (!ts) { return; }
      var d = new Date(ts * 1000);
      el.textContent = el.getAttribute("data-fmt") === "day"
        ? d.toISOString().slice(0, 10) : d.toLocaleString();
      el.title = d.toISOString();
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    times();
    if (!window.Chart) { return; }
    document.querySelectorAll("canvas.chart[data-chart]").forEach(draw);
  });
})();
