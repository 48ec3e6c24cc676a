// The fleet page's script (gpuclaim/fleet/page.py renders the rest): draws each node's devices as cells grouped
// by topology group, and polls /api/v1/fleet?since=<revision> every 2 s, redrawing only the nodes that changed.
// At 5,000 nodes x 8 GPUs: the first request starts before the server's HTML is parsed (the script runs in the
// head), one HTML string per chunk of rows into a detached rowgroup (no per-cell DOM calls, one layout), one listener
// of each kind on the table (events are delegated), and a draw in progress stops when a newer snapshot arrives.
(function () {
  'use strict';

  var POLL_MS = 2000;
  var TIMEOUT_MS = 10000;
  var CHUNK = 250;            // rows per insertAdjacentHTML: big enough to be cheap, small enough to yield
  var STATES = ['free', 'allocated', 'reserved', 'tainted', 'unhealthy'];
  var SIZES = ['1', '2', '4', '8'];

  var FILTERS = ['driver', 'model', 'nodeSelector', 'namespace'];

  var root = document.documentElement;
  var api = root.getAttribute('data-api');
  var rows, table, tip, status, form;     // set once the document is parsed (init)
  var revision = null;        // of the snapshot drawn; null until the first one is drawn
  var pending = null;         // of the snapshot being drawn (a chunked draw spans several polls at 5,000 nodes)
  var drawn = {};             // node name -> the JSON it was drawn from
  var order = [];             // node names in the order drawn
  var devices = {};           // cell id -> device, for the tooltip
  var generation = 0;         // bumped by each draw; a chunked draw stops when it is no longer the newest
  var timer = null;
  var inflight = null;

  function esc(value) {
    return String(value == null ? '' : value).replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
    });
  }

  function count(summary, a, b) {
    var v = summary && summary[a];
    if (b !== undefined) { v = v && v[b]; }
    return typeof v === 'number' ? v : 0;
  }

  // the same text page.py renders, so a redraw reads as the server's page did
  function devicesLine(s, zeros) {
    return count(s, 'devices', 'total') + ' devices: ' + STATES.filter(function (st) {
      return zeros || count(s, 'devices', st);
    }).map(function (st) {
      return '<span class="n s-' + st + '">' + count(s, 'devices', st) + ' ' + st + '</span>';
    }).join(', ');
  }

  function fitsLine(s) {
    return SIZES.map(function (n) {
      return '<span class="fit">' + n + '×: <b>' + count(s, 'tightFits', n) + '</b></span>';
    }).join(' ');
  }

  function migLine(parents) {
    if (!parents || !parents.length) { return '—'; }
    return parents.map(function (p) {
      var slices = Object.keys(p.freeSlices || {}).sort().map(function (k) {
        return esc(k) + '×' + p.freeSlices[k];
      }).join(', ');
      return esc(p.device) + ': ' + (slices || 'none');
    }).join('<br>');
  }

  function refs(list) {
    return (list || []).map(function (r) { return r.namespace + '/' + r.name; });
  }

  // one line per fact: the cell's accessible name and its tooltip say the same
  function describe(d) {
    var lines = [d.name + ' (' + (d.model || d.driver) + '): ' + d.state];
    if (d.redacted) {
      lines.push('used by a namespace you may not see');
    } else {
      var pods = refs(d.pods), claims = refs(d.claims);
      var namespaces = {};
      (d.pods || []).concat(d.claims || []).forEach(function (r) { namespaces[r.namespace] = true; });
      if (pods.length) { lines.push('pod ' + pods.join(', ')); }
      if (claims.length) { lines.push('claim ' + claims.join(', ')); }
      if (pods.length || claims.length) { lines.push('namespace ' + Object.keys(namespaces).sort().join(', ')); }
    }
    if (d.migParent) { lines.push('MIG slice of ' + d.migParent); }
    (d.taints || []).forEach(function (t) { lines.push('taint ' + t.key + ' (' + t.effect + ')'); });
    return lines;
  }

  function cellsHTML(node, rowIndex) {
    var first = true;
    return (node.groups || []).map(function (g, gi) {
      var label = g.kind + ' ' + g.name;
      var cells = (g.devices || []).map(function (d, di) {
        var id = rowIndex + '.' + gi + '.' + di;
        devices[id] = d;
        var html = '<button type="button" class="cell s-' + esc(d.state) + '" data-cell="' + id + '" tabindex="' +
          (first ? '0' : '-1') + '" aria-label="' + esc(describe(d).join('; ')) + '"><span class="dn">' +
          esc(d.name) + '</span><span class="st">' + esc(d.state) + '</span></button>';
        first = false;
        return html;
      }).join('');
      return '<div class="group" role="group" aria-label="' + esc(label) + '"><span class="gname">' + esc(label) +
        '</span><div class="gcells">' + cells + '</div></div>';
    }).join('');
  }

  function rowHTML(node, rowIndex) {
    var s = node.summary || {};
    var labels = Object.keys(node.labels || {}).sort().map(function (k) {
      return '<span class="label">' + esc(k) + '=' + esc(node.labels[k]) + '</span>';
    }).join(' ');
    return '<div role="row" class="row" data-node="' + esc(node.name) + '"><div role="rowheader" class="c node">' +
      '<span class="node-name">' + esc(node.name) + '</span><span class="drivers">' +
      esc((node.drivers || []).join(', ')) + '</span>' + labels + '</div><div role="cell" class="c devices">' +
      devicesLine(s, false) + '</div><div role="cell" class="c fits">' + fitsLine(s) + '</div><div role="cell" class="c num">' +
      count(s, 'largestFreeTightGroup') + '</div><div role="cell" class="c num">' + count(s, 'stranded') +
      '</div><div role="cell" class="c mig">' + migLine(node.migParents) + '</div><div role="cell" class="c cells">' +
      cellsHTML(node, rowIndex) + '</div></div>';
  }

  function setText(id, text) {
    var el = document.getElementById(id);
    if (el) { el.textContent = text; }
  }

  function drawSummary(snap) {
    var s = snap.summary || {};
    var fields = {devices: devicesLine(s, true), tightFits: fitsLine(s), stranded: String(count(s, 'stranded')),
                  freeMigSlices: String(count(s, 'freeMigSlices'))};
    Object.keys(fields).forEach(function (k) {
      var dd = document.querySelector('#fleet-summary [data-field="' + k + '"]');
      if (dd) { dd.innerHTML = fields[k]; }
    });
    setText('fleet-revision', String(snap.revision));
    setText('fleet-generated', snap.generatedAt || 'now');
    setText('fleet-node-count', '(' + (snap.nodes || []).length + ')');
  }

  function finish(snap) {
    revision = snap.revision;
    pending = null;
    root.setAttribute('data-drawn-revision', String(snap.revision));
    if (window.performance && performance.mark) { performance.mark('fleet-drawn-' + snap.revision); }
  }

  // every row again, in chunks, into a detached rowgroup (no layout until it is swapped in once); used for the
  // first draw and when nodes came, went or moved
  function drawAll(snap, gen) {
    var nodes = snap.nodes || [];
    var next = document.createElement('div');
    next.id = rows.id;
    next.setAttribute('role', 'rowgroup');
    var fresh = {};
    if (!nodes.length) {
      next.innerHTML = '<div role="row" class="row empty"><div role="cell">No nodes match (or none you may see).' +
        '</div></div>';
    }
    devices = {};
    var i = 0;
    function chunk() {
      if (gen !== generation) { return; }
      var html = '';
      for (var end = Math.min(i + CHUNK, nodes.length); i < end; i++) {
        fresh[nodes[i].name] = JSON.stringify(nodes[i]);
        html += rowHTML(nodes[i], i);
      }
      next.insertAdjacentHTML('beforeend', html);
      if (i < nodes.length) { setTimeout(chunk, 0); return; }
      rows.parentNode.replaceChild(next, rows);
      rows = next;
      drawn = fresh;
      order = nodes.map(function (n) { return n.name; });
      finish(snap);
    }
    chunk();
  }

  // same nodes in the same order: replace only the rows whose node changed
  function drawChanged(snap) {
    var nodes = snap.nodes || [];
    var trs = rows.children;
    nodes.forEach(function (n, k) {
      var j = JSON.stringify(n);
      if (drawn[n.name] === j) { return; }
      drawn[n.name] = j;
      var keep = document.activeElement && trs[k].contains(document.activeElement) &&
        document.activeElement.getAttribute('data-cell');
      trs[k].outerHTML = rowHTML(n, k);
      if (keep) {
        var again = rows.querySelector('[data-cell="' + keep + '"]');
        if (again) { again.focus(); }
      }
    });
    finish(snap);
  }

  function draw(snap) {
    if (window.performance && performance.mark) { performance.mark('fleet-draw-' + snap.revision); }
    generation += 1;
    pending = snap.revision;
    drawSummary(snap);
    var nodes = snap.nodes || [];
    var same = revision !== null && nodes.length === order.length && nodes.every(function (n, k) {
      return n.name === order[k];
    });
    if (same) { drawChanged(snap); } else { drawAll(snap, generation); }
  }

  function filterQuery() {
    var params = new URLSearchParams();
    Array.prototype.forEach.call(form.elements, function (el) {
      if (el.name && el.value.trim()) { params.set(el.name, el.value.trim()); }
    });
    return params;
  }

  // the filters of the page's own address: the server rendered the form from them
  function addressQuery() {
    var given = new URLSearchParams(location.search), params = new URLSearchParams();
    FILTERS.forEach(function (k) { if (given.get(k)) { params.set(k, given.get(k)); } });
    return params;
  }

  function say(text) {
    if (status.textContent !== text) { status.textContent = text; }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, POLL_MS);
  }

  // one GET of /api/v1/fleet: resolves to the snapshot, or null when unchanged (304); rejects with the reason
  function request(params) {
    var controller = new AbortController();
    var killer = setTimeout(function () { controller.abort(); }, TIMEOUT_MS);
    var query = params.toString();
    var done = fetch(api + (query ? '?' + query : ''), {
      headers: {'Accept': 'application/json'}, cache: 'no-store', credentials: 'same-origin',
      signal: controller.signal
    }).then(function (response) {
      if (response.status === 304) { return null; }
      return response.json().catch(function () { return null; }).then(function (data) {
        if (!response.ok) {
          var why = data && (data.message || data.error) || response.statusText;
          throw new Error('HTTP ' + response.status + (why ? ': ' + why : ''));
        }
        return data;
      });
    });
    done.then(function () { clearTimeout(killer); }, function () { clearTimeout(killer); });
    return {controller: controller, done: done};
  }

  function handle(req) {
    if (inflight) { inflight.controller.abort(); }
    inflight = req;
    req.done.then(function (snap) {
      say('');
      if (snap && snap.nodes && snap.revision !== revision && snap.revision !== pending) { draw(snap); }
    }).catch(function (err) {
      if (inflight !== req) { return; }     // aborted for a newer request
      say('Refresh failed (' + (err && err.message || err) + '); trying again every 2 s.');
    }).then(function () {
      if (inflight === req) { inflight = null; schedule(); }
    });
  }

  function poll() {
    var params = filterQuery();
    var known = pending !== null ? pending : revision;
    if (known !== null) { params.set('since', String(known)); }
    handle(request(params));
  }

  function showTip(cell) {
    var d = devices[cell.getAttribute('data-cell')];
    if (!d) { return; }
    tip.textContent = '';
    describe(d).forEach(function (line, k) {
      var el = document.createElement(k ? 'div' : 'strong');
      el.textContent = line;
      tip.appendChild(el);
    });
    tip.hidden = false;
    var box = cell.getBoundingClientRect();
    var left = Math.min(box.left, window.innerWidth - tip.offsetWidth - 8);
    var top = box.bottom + 6;
    if (top + tip.offsetHeight > window.innerHeight) { top = box.top - tip.offsetHeight - 6; }
    tip.style.left = Math.max(4, left) + 'px';
    tip.style.top = Math.max(4, top) + 'px';
    cell.setAttribute('aria-describedby', 'fleet-tip');
  }

  function hideTip(cell) {
    tip.hidden = true;
    if (cell) { cell.removeAttribute('aria-describedby'); }
  }

  function cellOf(target) {
    return target && target.closest ? target.closest('[data-cell]') : null;
  }

  // arrow keys move within a node's cells; only one cell per node is a tab stop (roving tabindex)
  function move(cell, key) {
    var all = Array.prototype.slice.call(cell.closest('[role=row]').querySelectorAll('[data-cell]'));
    var k = all.indexOf(cell);
    var next = {ArrowRight: k + 1, ArrowDown: k + 1, ArrowLeft: k - 1, ArrowUp: k - 1, Home: 0, End: all.length - 1}[key];
    if (next === undefined || next < 0 || next >= all.length) { return false; }
    all.forEach(function (c) { c.setAttribute('tabindex', '-1'); });
    all[next].setAttribute('tabindex', '0');
    all[next].focus();
    return true;
  }

  // started now, while the browser still parses the server's HTML; drawn once it is parsed
  var early = request(addressQuery());

  function init() {
    rows = document.getElementById('fleet-rows');
    table = document.getElementById('fleet-table');
    tip = document.getElementById('fleet-tip');
    status = document.getElementById('fleet-status');
    form = document.getElementById('fleet-filters');

    table.addEventListener('mouseover', function (ev) { var c = cellOf(ev.target); if (c) { showTip(c); } });
    table.addEventListener('mouseout', function (ev) { var c = cellOf(ev.target); if (c) { hideTip(c); } });
    table.addEventListener('focusin', function (ev) { var c = cellOf(ev.target); if (c) { showTip(c); } });
    table.addEventListener('focusout', function (ev) { var c = cellOf(ev.target); if (c) { hideTip(c); } });
    table.addEventListener('click', function (ev) { var c = cellOf(ev.target); if (c) { c.focus(); showTip(c); } });
    table.addEventListener('keydown', function (ev) {
      var c = cellOf(ev.target);
      if (!c) { return; }
      if (ev.key === 'Escape') { hideTip(c); return; }
      if (move(c, ev.key)) { ev.preventDefault(); }
    });

    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var query = filterQuery().toString();
      history.replaceState(null, '', location.pathname + (query ? '?' + query : ''));
      revision = null;
      pending = null;
      order = [];
      poll();
    });
    var clear = form.querySelector('a');
    if (clear) {
      clear.addEventListener('click', function (ev) {
        ev.preventDefault();
        Array.prototype.forEach.call(form.elements, function (el) { if (el.name) { el.value = ''; } });
        form.requestSubmit();
      });
    }

    root.classList.add('js');
    handle(early);
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', init);
  } else {
    init();
  }
})();
