// The xdpdns status page's script: it keeps the server-rendered tables
// fresh (ui/tables, every 2 s) and draws answers per second, kernel and
// fallback, from the server's counters (ui/counters, every second) over
// the last two minutes. Without it the page still shows every table.
(function () {
  'use strict';

  var TABLES_MS = 2000;
  var COUNTERS_MS = 1000;
  var WINDOW_MS = 120000;
  // The chart's drawing area inside its 600 x 180 viewBox.
  var W = 600, TOP = 20, BOTTOM = 170;

  var main = document.getElementById('tables');
  var live = document.getElementById('live');
  var chart = document.getElementById('chart');
  if (!main || !chart) {
    return;
  }
  var kernelLine = document.getElementById('kernel-line');
  var fallbackLine = document.getElementById('fallback-line');
  var chartMax = document.getElementById('chart-max');
  var kernelRate = document.getElementById('kernel-rate');
  var fallbackRate = document.getElementById('fallback-rate');
  var kernelShare = document.getElementById('kernel-share');

  // Counter readings: {t: ms, k: kernel answers, f: fallback answers}.
  var samples = [];
  var busy = {tables: false, counters: false};

  function clock(ms) {
    return new Date(ms).toISOString().slice(11, 19) + ' UTC';
  }

  function status(text, bad) {
    if (live) {
      live.textContent = text;
      live.className = bad ? 'updated bad' : 'updated';
    }
  }

  function get(path, kind, done) {
    if (busy[kind]) {
      return;
    }
    busy[kind] = true;
    fetch(path, {cache: 'no-store', credentials: 'same-origin'})
      .then(function (r) {
        return (kind === 'tables' ? r.text() : r.json()).then(function (body) {
          done(r, body);
        });
      })
      .catch(function () {
        status('Server unreachable; retrying', true);
      })
      .then(function () {
        busy[kind] = false;
      });
  }

  function refreshTables() {
    get('ui/tables', 'tables', function (r, html) {
      // Rendered and escaped by the server, like the page itself.
      main.innerHTML = html;
      if (r.ok) {
        status('Live: updated at ' + clock(Date.now()), false);
      } else {
        status('Not authorised any more (' + r.status + ')', true);
      }
    });
  }

  function refreshCounters() {
    get('ui/counters', 'counters', function (r, s) {
      if (!r.ok || !s.available) {
        return;
      }
      var k = s.answers.kernel;
      var f = s.answers.fallback_udp + s.answers.fallback_tcp;
      var last = samples[samples.length - 1];
      if (last && s.at_ms <= last.t) {
        return;
      }
      // Counters only grow: smaller ones mean the server restarted.
      if (last && (k < last.k || f < last.f)) {
        samples = [];
      }
      samples.push({t: s.at_ms, k: k, f: f});
      while (samples.length > 2 && samples[0].t < s.at_ms - WINDOW_MS - 5000) {
        samples.shift();
      }
      draw();
    });
  }

  // A round number at or above v: 1, 2 or 5 times a power of ten.
  function niceCeil(v) {
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) {
      if (v <= steps[i] * p) {
        return steps[i] * p;
      }
    }
    return 10 * p;
  }

  function fmt(rate) {
    return rate >= 100 ? rate.toFixed(0) : rate.toFixed(1);
  }

  function draw() {
    var rates = [];
    for (var i = 1; i < samples.length; i++) {
      var dt = (samples[i].t - samples[i - 1].t) / 1000;
      if (dt > 0) {
        rates.push({
          t: samples[i].t,
          k: (samples[i].k - samples[i - 1].k) / dt,
          f: (samples[i].f - samples[i - 1].f) / dt
        });
      }
    }
    chart.setAttribute('data-samples', String(samples.length));
    if (rates.length === 0) {
      return;
    }
    var peakK = 0, peakF = 0;
    rates.forEach(function (r) {
      peakK = Math.max(peakK, r.k);
      peakF = Math.max(peakF, r.f);
    });
    var top = niceCeil(Math.max(peakK, peakF, 1));
    var now = rates[rates.length - 1].t;
    function points(pick) {
      return rates.map(function (r) {
        var x = W - (now - r.t) / WINDOW_MS * W;
        var y = BOTTOM - pick(r) / top * (BOTTOM - TOP);
        return x.toFixed(1) + ',' + y.toFixed(1);
      }).join(' ');
    }
    kernelLine.setAttribute('points', points(function (r) { return r.k; }));
    fallbackLine.setAttribute('points', points(function (r) { return r.f; }));
    chart.setAttribute('data-kernel-peak', peakK.toFixed(1));
    chart.setAttribute('data-fallback-peak', peakF.toFixed(1));
    chartMax.textContent = top + '/s';
    var latest = rates[rates.length - 1];
    kernelRate.textContent = fmt(latest.k);
    fallbackRate.textContent = fmt(latest.f);
    var first = samples[0], lastSample = samples[samples.length - 1];
    var dk = lastSample.k - first.k, df = lastSample.f - first.f;
    kernelShare.textContent = dk + df > 0
      ? 'kernel share over the window: ' + (100 * dk / (dk + df)).toFixed(1) + '%'
      : '';
  }

  refreshCounters();
  setInterval(refreshCounters, COUNTERS_MS);
  setInterval(refreshTables, TABLES_MS);
}());
