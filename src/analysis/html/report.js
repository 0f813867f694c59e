// iotwin HTML report: builds tables and Vega-Lite charts from the embedded report model
// (the same JSON `iotwin report --json` prints). Runs offline: vega, vega-lite and vega-embed
// are inlined in the page. When every chart has rendered, <body data-rendered="N"> is set
// (N = number of charts); errors are collected in <body data-errors> and #iotwin-errors.
(function () {
  'use strict';
  const model = JSON.parse(document.getElementById('iotwin-model').textContent);
  const main = document.getElementById('main');
  const charts = [];
  const MiB = 1024 * 1024;

  // ---- formatting -------------------------------------------------------------------------
  function fmtCount(v) { return (v || 0).toLocaleString('en-US'); }
  function fmtBytes(v) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let u = 0;
    v = v || 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    if (u === 0) return v.toFixed(0) + ' B';
    return (Number.isInteger(v) ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[u];
  }
  function fmtDur(ns) {
    ns = ns || 0;
    if (ns < 1e3) return ns.toFixed(0) + 'ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + 'us';
    if (ns < 1e9) return (ns / 1e6).toFixed(2) + 'ms';
    return (ns / 1e9).toFixed(3) + 's';
  }
  function pct(s) { return ((s || 0) * 100).toFixed(1) + '%'; }

  // ---- DOM helpers (textContent only: names in traces are data, never markup) ----------------
  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
    }
    for (const c of children || []) if (c) e.appendChild(c);
    return e;
  }
  function section(title) {
    const id = title.toLowerCase().replace(/\(.*/, '').trim().replace(/[^a-z0-9]+/g, '-');
    const s = el('section', {id: id}, [el('h2', {text: title})]);
    main.appendChild(s);
    return s;
  }
  // cols: [{h: header, l: left-aligned?, cls}], rows: arrays of cell strings
  function table(cols, rows, cls, noHead) {
    const head = el('tr', {}, cols.map(c => el('th', {text: c.h, class: c.l ? 'l' : ''})));
    // A path cell is right-to-left so that a long path loses its start, not its name; marks
    // around the text keep its slashes and brackets in their places.
    const lrm = String.fromCharCode(0x200e);
    const shown = (v, c) => c.cls === 'path' ? lrm + String(v) + lrm : String(v);
    const body = rows.map(r => el('tr', {}, r.map((v, i) =>
      el('td', {text: shown(v, cols[i]), class: cols[i].cls || (cols[i].l ? 'l' : ''), title: String(v)}))));
    return el('table', {class: cls || ''}, [noHead ? null : el('thead', {}, [head]), el('tbody', {}, body)]);
  }
  function facts(rows) {
    return table([{h: '', l: true}, {h: '', l: true}], rows, 'facts', true);
  }
  function chart(parent, title, spec, note) {
    const id = 'chart-' + charts.length;
    const box = el('div', {class: 'chart-box'}, [el('h3', {text: title}),
      el('div', {class: 'chart', id: id, 'data-chart': title})]);
    if (note) box.appendChild(el('div', {class: 'muted', text: note}));
    parent.appendChild(box);
    spec.$schema = 'https://vega.github.io/schema/vega-lite/v6.json';
    spec.config = Object.assign({font: 'system-ui, sans-serif'}, spec.config || {});
    charts.push({id: id, spec: spec});
  }
  // The plot width of a chart with one band per distinct value of rows[field]: `per` pixels a
  // band, at most what fits two charts side by side in a card, so none runs off its card.
  function bandWidth(rows, field, per) {
    const bands = new Set(rows.map(r => r[field])).size;
    return Math.max(160, Math.min(520, bands * per));
  }
  function grid(parent) { const g = el('div', {class: 'grid'}); parent.appendChild(g); return g; }
  function fileName(f) {
    if (f.names && f.names.length) return f.names[0] + (f.names.length > 1 ? ' (+' + (f.names.length - 1) + ')' : '');
    return 'dev ' + (f.dev >>> 20) + ':' + (f.dev & 0xfffff) + ' ino ' + f.ino;
  }
  function dominantLine(parent, label, z) {
    if (!z || !z.dominant) return;
    const d = z.dominant;
    parent.appendChild(el('div', {class: 'dominant'}, [
      el('span', {text: label + ': '}),
      el('b', {text: fmtBytes(d.size)}),
      el('span', {text: ' = ' + pct(d.ops_share) + ' of ops, ' + pct(d.bytes_share) + ' of bytes' +
        (z.exact === false ? ' (approximate)' : '') + '  (' + fmtCount(z.ops) + ' requests)'})]));
  }

  // ---- header ----------------------------------------------------------------------------
  const cap = model.capture || {};
  const host = cap.host || {};
  document.getElementById('subtitle').textContent =
      (model.trace && model.trace.path ? model.trace.path + ' · ' : '') +
      (host.hostname || '') + ' · ' + fmtDur(cap.duration_ns);

  // ---- capture ----------------------------------------------------------------------------
  {
    const s = section('Capture');
    const rows = [];
    if (host.hostname !== undefined)
      rows.push(['host', [host.hostname, 'linux ' + (host.kernel || '?'), host.arch || '',
        (host.cpus || '?') + ' CPUs', 'page ' + fmtBytes(host.page_size || 0)].join('  ')]);
    if (Array.isArray(cap.command)) rows.push(['command', cap.command.join(' ')]);
    rows.push(['duration', fmtDur(cap.duration_ns) + (cap.complete ? '' : '  (INCOMPLETE: no footer)') +
      (cap.stop_reason ? '  stop: ' + cap.stop_reason : '') +
      (cap.exit_status !== undefined ? ', exit status ' + JSON.stringify(cap.exit_status) : '')]);
    if (cap.layers) rows.push(['layers', Object.entries(cap.layers).map(([k, l]) =>
      k + (l && l.enabled ? ' on' : ' off' + (l && l.reason ? ' (' + l.reason + ')' : ''))).join(', ')]);
    const lost = Object.entries(cap.lost || {}).filter(([, v]) => v > 0);
    rows.push(['lost events', lost.length ? lost.map(([k, v]) => k + ' ' + fmtCount(v)).join(', ') : 'none']);
    if (cap.replay) rows.push(['replay', 'of ' + cap.replay.source + ', pace ' + cap.replay.pace]);
    if (cap.scope) {
      const d = cap.scope_dropped || {};
      rows.push(['recorded with scope', cap.scope.description + '  (left out ' + fmtCount(d.records) +
        ' records: ' + fmtCount(d.calls) + ' calls, ' + fmtBytes(d.bytes) + ', ' + fmtCount(d.faults) +
        ' page faults)']);
    }
    if (model.filter) rows.push(['filter', JSON.stringify(model.filter)]);
    if (model.scope) {
      const lo = model.scope.left_out || {};
      rows.push(['scope', model.scope.description + '  (left out ' + fmtCount(lo.calls) + ' calls, ' +
        fmtBytes(lo.call_bytes) + '; ' + fmtCount(lo.async) + ' async requests, ' +
        fmtBytes(lo.async_bytes) + '; ' + fmtCount(lo.faults) + ' page faults)']);
    }
    if (model.trace && model.trace.damage) rows.push(['damage', model.trace.damage]);
    s.appendChild(facts(rows));
  }

  // ---- summary ----------------------------------------------------------------------------
  const totals = model.totals || {};
  {
    const s = section('Summary');
    const rows = ['read', 'write'].map(d => {
      const t = totals[d] || {};
      return [d + 's', fmtCount(t.ops) + ' ops, ' + fmtBytes(t.bytes) + ', ' + (t.iops || 0).toFixed(1) +
        ' IOPS, ' + fmtBytes(t.bytes_per_s) + '/s' + (t.async_ops ? ' (incl. ' + fmtCount(t.async_ops) + ' async)' : '')];
    });
    for (const d of ['read', 'write']) {
      const t = totals[d] || {}, calls = (t.syscall_ops || 0) + (t.async_ops || 0);
      if (!calls && !t.mmap_ops) continue;
      rows.push([d + 's via', fmtBytes((t.syscall_bytes || 0) + (t.async_bytes || 0)) + ' by ' + fmtCount(calls) + ' calls, ' +
        fmtBytes(t.mmap_bytes || 0) + ' mapped (' + fmtCount(t.mmap_ops || 0) + ' faults)']);
    }
    const mix = totals.mix || {};
    rows.push(['mix', 'reads are ' + pct(mix.read_ops_share) + ' of ops, ' + pct(mix.read_bytes_share) + ' of bytes']);
    const other = Object.entries(model.non_storage || {}).filter(([, k]) => k.read_ops || k.write_ops)
      .map(([name, k]) => name.replace('_', ' ') + ' ' + fmtBytes(k.read_bytes) + ' read, ' + fmtBytes(k.write_bytes) + ' written');
    if (other.length) rows.push(['not storage', other.join('; ') + ' (left out of the figures above)']);
    rows.push(['calls', fmtCount(totals.syscalls) + ' system calls (' + fmtCount(totals.errors) + ' failed), ' +
      fmtCount((model.processes || {}).total) + ' processes, ' + fmtCount((model.threads || {}).total) +
      ' threads, ' + fmtCount((model.files || {}).total) + ' files']);
    s.appendChild(facts(rows));
  }

  // ---- phases: bands behind the time plots ----------------------------------------------------
  // Each phase (intent begin..end, docs/report.md "Phases") as a shaded band from its start to
  // its end, seconds since the trace's start; nested phases shade over their parents. Labels on
  // the outermost phases only, so that many short phases do not bury the plot in text.
  const phases = ((model.intents || {}).phases || []).slice(0, 500);
  const phaseBands = phases.map(p => ({start: p.start_ns / 1e9, end: p.end_ns / 1e9, phase: p.label,
    depth: p.depth, duration: fmtDur(p.duration_ns),
    device: fmtBytes(p.device_read_bytes) + ' read, ' + fmtBytes(p.device_write_bytes) + ' written'}));
  function withPhases(spec) {
    if (!phaseBands.length) return spec;
    const {data, mark, encoding} = spec;
    const x = {field: 'start', type: 'quantitative', title: null};
    const layers = [
      {name: 'phase_bands', data: {values: phaseBands}, mark: {type: 'rect', color: '#7f7f7f', opacity: 0.13},
        encoding: {x: x, x2: {field: 'end'},
          tooltip: [{field: 'phase'}, {field: 'duration'}, {field: 'device', title: 'device'}]}},
      {name: 'phase_labels', data: {values: phaseBands.filter(b => b.depth === 0).slice(0, 20)},
        mark: {type: 'text', align: 'left', baseline: 'top', dx: 2, dy: 2, fontSize: 9, color: '#555'},
        encoding: {x: x, y: {value: 0}, text: {field: 'phase'}}},
      {data: data, mark: mark, encoding: encoding}];
    const out = Object.assign({}, spec, {layer: layers});
    delete out.data; delete out.mark; delete out.encoding;
    return out;
  }

  // ---- throughput over time -----------------------------------------------------------------
  const ts = model.timeseries || {};
  if (ts.read_ops && ts.read_ops.length) {
    const s = section('IOPS and throughput over time');
    const g = grid(s);
    // At most ~200 points per series: merge neighbouring buckets.
    const n = ts.read_ops.length, merge = Math.max(1, Math.ceil(n / 200));
    const width = (ts.bucket_ns || 1) * merge / 1e9;
    const rebin = a => { const out = []; for (let i = 0; i < a.length; i += merge) out.push(a.slice(i, i + merge).reduce((x, y) => x + y, 0)); return out; };
    const iops = [], tput = [];
    const series = [['read', 'read_ops', 'read_bytes'], ['write', 'write_ops', 'write_bytes'],
                    ['mapped read', 'mmap_read_ops', 'mmap_read_bytes'],
                    ['mapped write', 'mmap_write_ops', 'mmap_write_bytes'],
                    ['block read', 'block_read_ops', 'block_read_bytes'],
                    ['block write', 'block_write_ops', 'block_write_bytes']];
    for (const [name, ok, bk] of series) {
      if (!ts[ok]) continue;
      const ops = rebin(ts[ok]), bytes = rebin(ts[bk]);
      ops.forEach((v, i) => {
        iops.push({t: i * width, series: name, v: v / width});
        tput.push({t: i * width, series: name, v: bytes[i] / width / MiB});
      });
    }
    const enc = (title) => ({
      x: {field: 't', type: 'quantitative', title: 'time since start (s)'},
      y: {field: 'v', type: 'quantitative', title: title},
      color: {field: 'series', type: 'nominal', title: null, sort: ['read', 'write', 'block read', 'block write']}});
    const bandNote = phaseBands.length ? '; shaded: phases' : '';
    chart(g, 'IOPS', withPhases({width: 520, height: 200, data: {values: iops}, mark: {type: 'line', interpolate: 'step-after'},
      encoding: enc('operations / s')}), 'bucket ' + fmtDur(width * 1e9) + bandNote);
    chart(g, 'Throughput', withPhases({width: 520, height: 200, data: {values: tput}, mark: {type: 'line', interpolate: 'step-after'},
      encoding: enc('MiB / s')}), 'bucket ' + fmtDur(width * 1e9) + bandNote);
    if (ts.major_faults) {
      chart(g, 'Major page faults', withPhases({width: 520, height: 140,
        data: {values: rebin(ts.major_faults).map((v, i) => ({t: i * width, v: v / width}))},
        mark: {type: 'area', interpolate: 'step-after', opacity: 0.7},
        encoding: {x: {field: 't', type: 'quantitative', title: 'time since start (s)'},
                   y: {field: 'v', type: 'quantitative', title: 'major faults / s'}}}));
    }
  }

  // ---- request sizes ------------------------------------------------------------------------
  function sizeRows(label, z) {
    return (z.histogram || []).map(h => ({op: label, le: h.le, bucket: '<= ' + fmtBytes(h.le), count: h.count,
      share: z.ops ? h.count / z.ops : 0, bytes_share: z.bytes ? h.bytes / z.bytes : 0}));
  }
  function sizeChart(parent, title, rows) {
    chart(parent, title, {width: bandWidth(rows, 'bucket', 16 * new Set(rows.map(r => r.op)).size), height: 220, data: {values: rows}, mark: 'bar',
      encoding: {
        x: {field: 'bucket', type: 'ordinal', sort: {field: 'le', op: 'min'}, title: 'request size (power-of-two buckets)'},
        xOffset: {field: 'op', type: 'nominal'},
        y: {field: 'share', type: 'quantitative', title: 'share of requests', axis: {format: '%'}},
        color: {field: 'op', type: 'nominal', title: null},
        tooltip: [{field: 'op'}, {field: 'bucket'}, {field: 'count', format: ','},
                  {field: 'share', format: '.1%'}, {field: 'bytes_share', format: '.1%', title: 'share of bytes'}]}});
  }
  if ((model.sizes || []).length || model.block || model.async) {
    const s = section('Request sizes');
    for (const z of model.sizes || []) dominantLine(s, z.op, z);
    if (model.block) { dominantLine(s, 'block read', model.block.read); dominantLine(s, 'block write', model.block.write); }
    if (model.async) for (const r of model.async.rows) dominantLine(s, r.engine + ' ' + r.name, r);
    const g = grid(s);
    let rows = [];
    for (const z of model.sizes || []) rows = rows.concat(sizeRows(z.op, z));
    if (rows.length) sizeChart(g, 'System-call request sizes', rows);
    if (model.block) {
      const br = sizeRows('block read', model.block.read).concat(sizeRows('block write', model.block.write));
      if (br.length) sizeChart(g, 'Block request sizes', br);
    }
    if (model.async) {
      let ar = [];
      for (const r of model.async.rows) ar = ar.concat(sizeRows(r.engine + ' ' + r.name, r));
      if (ar.length) sizeChart(g, 'Async request sizes', ar);
    }
  }

  // ---- access pattern -------------------------------------------------------------------------
  const pat = model.pattern || {};
  if (pat.read && (pat.read.first || (pat.write && pat.write.first))) {
    const s = section('Access pattern');
    s.appendChild(el('div', {class: 'muted', text: 'Per (thread, file) stream: sequential = starts where the previous request ended; strided = skips the same distance as the previous request; random = anything else.'}));
    const g = grid(s);
    const rows = [];
    for (const d of ['read', 'write']) {
      const p = pat[d];
      if (!p || !(p.sequential + p.strided + p.random)) continue;
      for (const k of ['sequential', 'strided', 'random']) rows.push({dir: d, kind: k, share: p[k + '_share'], n: p[k]});
    }
    if (rows.length) {
      chart(g, 'Sequential / strided / random', {width: 420, height: {step: 34}, data: {values: rows}, mark: 'bar',
        encoding: {y: {field: 'dir', type: 'nominal', title: null},
                   x: {field: 'share', type: 'quantitative', stack: 'normalize', title: 'share of requests', axis: {format: '%'}},
                   color: {field: 'kind', type: 'nominal', title: null, sort: ['sequential', 'strided', 'random']},
                   order: {field: 'kind'},
                   tooltip: [{field: 'dir'}, {field: 'kind'}, {field: 'n', format: ','}, {field: 'share', format: '.1%'}]}});
    }
    const seek = [];
    for (const d of ['read', 'write']) {
      for (const h of (pat[d] && pat[d].seek_histogram) || []) {
        const label = h.from === 0 ? '0' : (h.from < 0 ? '-' : '+') + fmtBytes(Math.abs(h.from));
        seek.push({dir: d, from: h.from, bucket: label, count: h.count});
      }
    }
    if (seek.length) {
      chart(g, 'Seek distance (offset - previous end)', {width: bandWidth(seek, 'bucket', 36), height: 200, data: {values: seek}, mark: 'bar',
        encoding: {x: {field: 'bucket', type: 'ordinal', sort: {field: 'from', op: 'min'}, title: 'distance (log2 buckets)'},
                   xOffset: {field: 'dir', type: 'nominal'},
                   y: {field: 'count', type: 'quantitative', title: 'requests (square-root scale)', scale: {type: 'sqrt'}},
                   color: {field: 'dir', type: 'nominal', title: null}}});
    }
  }

  // ---- offset heat maps -----------------------------------------------------------------------
  if ((model.heatmaps || []).length) {
    const s = section('Offsets over time (busiest files)');
    for (const h of model.heatmaps) {
      const g = grid(s);
      const span = (h.span_ns || 1) / 1e9;
      const tstep = span / h.time_bins, ostep = h.max_offset / h.offset_bins / MiB;
      const cells = h.cells.map(([t, o, n, b]) => ({t0: t * tstep, t1: (t + 1) * tstep,
        o0: o * ostep, o1: (o + 1) * ostep, ops: n, bytes: b}));
      const name = fileName(h);
      chart(g, 'Heat map: ' + name, {width: 460, height: 220, data: {values: cells}, mark: 'rect',
        encoding: {x: {field: 't0', type: 'quantitative', title: 'time since start (s)'}, x2: {field: 't1'},
                   y: {field: 'o0', type: 'quantitative', title: 'file offset (MiB)'}, y2: {field: 'o1'},
                   color: {field: 'ops', type: 'quantitative', title: 'requests', scale: {scheme: 'viridis'}},
                   tooltip: [{field: 't0', format: '.3f', title: 'from s'}, {field: 'o0', format: '.1f', title: 'from MiB'},
                             {field: 'ops', format: ','}, {field: 'bytes', format: ','}]}});
      const pts = h.points.map(([t, o, len, dir]) => ({t: t / 1e9, off: o / MiB, len: len, dir: dir ? 'write' : 'read'}));
      chart(g, 'Offset over time: ' + name, {width: 460, height: 220, data: {values: pts},
        mark: {type: 'point', filled: true, size: 12, opacity: 0.6},
        encoding: {x: {field: 't', type: 'quantitative', title: 'time since start (s)'},
                   y: {field: 'off', type: 'quantitative', title: 'file offset (MiB)'},
                   color: {field: 'dir', type: 'nominal', title: null},
                   tooltip: [{field: 't', format: '.6f'}, {field: 'off', format: '.3f'}, {field: 'len', format: ','}]}},
        h.sample_every > 1 ? 'every ' + h.sample_every + 'th request shown' : 'every request shown');
    }
  }

  // ---- latency ---------------------------------------------------------------------------------
  {
    const rows = [];
    const add = (layer, name, l) => {
      if (!l || !l.count) return;
      for (const p of ['p50', 'p90', 'p99', 'max']) if (l[p] > 0) rows.push({layer: layer, name: name, pct: p, us: l[p] / 1e3});
    };
    for (const o of model.ops || []) add('syscall', o.op, o.latency_ns);
    if (model.async) for (const r of model.async.rows) add('async', r.engine + ' ' + r.name, r.latency_ns);
    if (model.block) for (const [k, l] of Object.entries(model.block.latency_ns || {})) add('block', 'block ' + k, l);
    if (model.nvme) add('nvme', 'nvme', model.nvme.latency_ns);
    if (rows.length) {
      const s = section('Latency');
      s.appendChild(table([{h: 'layer', l: true}, {h: 'operation', l: true}, {h: 'count'}, {h: 'p50'}, {h: 'p90'}, {h: 'p99'}, {h: 'max'}],
        [].concat(
          (model.ops || []).filter(o => o.latency_ns).map(o => ['syscall', o.op, fmtCount(o.count), fmtDur(o.latency_ns.p50), fmtDur(o.latency_ns.p90), fmtDur(o.latency_ns.p99), fmtDur(o.latency_ns.max)]),
          model.async ? model.async.rows.map(r => ['async', r.engine + ' ' + r.name, fmtCount(r.count), fmtDur(r.latency_ns.p50), fmtDur(r.latency_ns.p90), fmtDur(r.latency_ns.p99), fmtDur(r.latency_ns.max)]) : [],
          model.block ? Object.entries(model.block.latency_ns || {}).map(([k, l]) => ['block', k, fmtCount(l.count), fmtDur(l.p50), fmtDur(l.p90), fmtDur(l.p99), fmtDur(l.max)]) : [])));
      const g = grid(s);
      chart(g, 'Latency percentiles per operation and layer', {width: bandWidth(rows, 'name', 40), height: 240, data: {values: rows},
        mark: {type: 'point', filled: true, size: 70},
        encoding: {x: {field: 'name', type: 'nominal', title: null, sort: null, axis: {labelAngle: -30}},
                   y: {field: 'us', type: 'quantitative', scale: {type: 'log'}, title: 'microseconds (log scale)'},
                   color: {field: 'pct', type: 'nominal', title: null, sort: ['p50', 'p90', 'p99', 'max']},
                   shape: {field: 'pct', type: 'nominal', title: null, sort: ['p50', 'p90', 'p99', 'max']},
                   tooltip: [{field: 'layer'}, {field: 'name'}, {field: 'pct'}, {field: 'us', format: ',.1f'}]}});
    }
  }

  // ---- tables: ops, processes, threads, files -----------------------------------------------------
  if ((model.ops || []).length) {
    const s = section('Operations');
    s.appendChild(table([{h: 'op', l: true}, {h: 'count'}, {h: 'errors'}, {h: 'bytes'}, {h: 'time in call'}],
      model.ops.map(o => [o.op, fmtCount(o.count), fmtCount(o.errors), o.bytes ? fmtBytes(o.bytes) : '-', fmtDur(o.io_ns)])));
  }
  if (model.processes && model.processes.rows.length) {
    const s = section('Processes (' + model.processes.rows.length + ' of ' + model.processes.total + ')');
    s.appendChild(table([{h: 'tgid'}, {h: 'comm', l: true}, {h: 'threads'}, {h: 'ops'}, {h: 'read'}, {h: 'written'}, {h: 'I/O time'}, {h: 'faults'}],
      model.processes.rows.map(p => [p.tgid, p.comm, p.threads, fmtCount(p.ops), fmtBytes(p.read_bytes), fmtBytes(p.write_bytes), fmtDur(p.io_ns), fmtCount(p.faults)])));
  }
  if (model.threads && model.threads.rows.length) {
    const s = section('Threads (' + model.threads.rows.length + ' of ' + model.threads.total + ')');
    s.appendChild(table([{h: 'tid'}, {h: 'tgid'}, {h: 'comm', l: true}, {h: 'ops'}, {h: 'read'}, {h: 'written'}, {h: 'I/O time'}, {h: 'first op'}],
      model.threads.rows.map(t => [t.tid, t.tgid, t.comm, fmtCount(t.ops), fmtBytes(t.read_bytes), fmtBytes(t.write_bytes), fmtDur(t.io_ns), fmtDur(t.first_op_ns)])));
  }
  if (model.files && model.files.rows.length) {
    const s = section('Files (' + model.files.rows.length + ' of ' + model.files.total + ', by bytes)');
    const seq = p => (p.sequential + p.strided + p.random) ? pct(p.sequential_share) : '-';
    s.appendChild(table([{h: 'file', l: true, cls: 'path'}, {h: 'opens'}, {h: 'reads'}, {h: 'read'}, {h: 'writes'}, {h: 'written'},
                         {h: 'read seq'}, {h: 'write seq'}, {h: 'faults'}, {h: 'hit ratio'}],
      model.files.rows.map(f => [fileName(f), fmtCount(f.opens), fmtCount(f.read.ops + f.read.async_ops), fmtBytes(f.read.bytes + f.read.async_bytes + (f.read.mmap_bytes || 0)),
        fmtCount(f.write.ops + f.write.async_ops), fmtBytes(f.write.bytes + f.write.async_bytes + (f.write.mmap_bytes || 0)), seq(f.read.pattern), seq(f.write.pattern),
        f.faults ? fmtCount(f.faults.total) : '-', f.hit_ratio !== undefined ? pct(f.hit_ratio) : '-'])));
  }

  // ---- memory, block, amplification, async, intents ------------------------------------------------
  if (model.memory) {
    const m = model.memory, s = section('Memory: mapped-file faults, page cache, write-back');
    const rows = [
      ['faults', fmtCount(m.faults.total) + ' (' + fmtCount(m.faults.major) + ' major, ' + fmtCount(m.faults.minor) + ' minor), ' + fmtCount(m.faults.pages) + ' pages'],
      ['page cache', fmtCount(m.page_cache.added_pages) + ' pages added, ' + fmtCount(m.page_cache.deleted_pages) + ' removed; readahead ' +
        fmtCount(m.page_cache.readahead_windows) + ' windows / ' + fmtCount(m.page_cache.readahead_pages) + ' pages'],
      ['write-back', fmtCount(m.writeback.dirtied_pages) + ' pages dirtied, ' + fmtCount(m.writeback.written_pages) + ' written back']];
    if (m.read_hit_ratio !== undefined) rows.push(['hit ratio', pct(m.read_hit_ratio) + ' of pages read (by calls and faults) were cached']);
    if (m.fault_hit_ratio !== undefined) rows.push(['minor-fault share', pct(m.fault_hit_ratio) + ' (no page mapped missed the cache)']);
    s.appendChild(facts(rows));
  }
  if (model.block) {
    const b = model.block, s = section('Block layer');
    s.appendChild(facts([
      ['requests', fmtCount(b.requests) + '; reads are ' + pct(b.mix.read_ops_share) + ' of reads and writes, ' + pct(b.mix.read_bytes_share) + ' of their bytes'],
      ['read', fmtCount(b.read.ops) + ' requests, ' + fmtBytes(b.read.bytes) + ', sequential ' + pct(b.read.pattern.sequential_share)],
      ['write', fmtCount(b.write.ops) + ' requests, ' + fmtBytes(b.write.bytes) + ', sequential ' + pct(b.write.pattern.sequential_share)]]));
    s.appendChild(table([{h: 'device', l: true}, {h: 'requests'}, {h: 'queued'}, {h: 'read'}, {h: 'written'}, {h: 'merges'}, {h: 'splits'}, {h: 'flushes'}, {h: 'errors'}],
      b.devices.map(d => [d.name, fmtCount(d.requests), fmtCount(d.queued), fmtBytes(d.read.bytes), fmtBytes(d.write.bytes), fmtCount(d.merges), fmtCount(d.splits), fmtCount(d.flushes), fmtCount(d.errors)])));
  }
  if (model.amplification) {
    const a = model.amplification, s = section('Amplification (block bytes / bytes the program moved by calls and mappings)');
    const rows = [];
    if (a.read !== undefined) rows.push(['read', fmtBytes(a.block_read_bytes) + ' / ' + fmtBytes(a.app_read_bytes + (a.fault_read_bytes || 0)) + ' = ' + a.read.toFixed(2) + 'x']);
    if (a.write !== undefined) rows.push(['write', fmtBytes(a.block_write_bytes) + ' / ' + fmtBytes(a.app_write_bytes + (a.fault_write_bytes || 0)) + ' = ' + a.write.toFixed(2) + 'x']);
    s.appendChild(facts(rows));
  }
  if (model.intents) {
    const s = section('Intent markers');
    s.appendChild(table([{h: 'label', l: true}, {h: 'intervals'}, {h: 'instants'}, {h: 'total'}, {h: 'mean'}, {h: 'max'}, {h: 'ops'}, {h: 'bytes'}],
      model.intents.rows.map(r => [r.label, fmtCount(r.intervals), fmtCount(r.instants), fmtDur(r.total_ns), fmtDur(r.mean_ns), fmtDur(r.max_ns), fmtCount(r.ops), fmtBytes(r.bytes)])));
    if (phases.length) {
      s.appendChild(el('h3', {text: 'Phases (calls, latency, faults: the marking thread\'s; device: block requests issued while open)'}));
      const lat = (p, d) => p[d + '_calls'] ? fmtDur(p[d + '_p50_ns']) + ' / ' + fmtDur(p[d + '_p99_ns']) : '-';
      s.appendChild(table([{h: 'phase', l: true}, {h: 'start'}, {h: 'duration'}, {h: 'calls'}, {h: 'read'}, {h: 'written'},
        {h: 'read p50 / p99'}, {h: 'write p50 / p99'}, {h: 'device requests'}, {h: 'device read'}, {h: 'device written'},
        {h: 'mapped'}, {h: 'major faults'}],
        phases.map(p => ['\u00a0\u00a0'.repeat(Math.min(p.depth, 4)) + p.label + (p.open ? ' (open)' : ''), fmtDur(p.start_ns), fmtDur(p.duration_ns),
          fmtCount(p.read_calls + p.write_calls), fmtBytes(p.read_bytes), fmtBytes(p.write_bytes), lat(p, 'read'), lat(p, 'write'),
          fmtCount(p.device_read_requests + p.device_write_requests), fmtBytes(p.device_read_bytes), fmtBytes(p.device_write_bytes),
          fmtBytes(p.mapped_bytes), fmtCount(p.major_faults)])));
    }
  }

  // ---- render -------------------------------------------------------------------------------------
  document.body.setAttribute('data-charts', String(charts.length));
  Promise.all(charts.map(c => vegaEmbed('#' + c.id, c.spec, {mode: 'vega-lite', renderer: 'svg', actions: false})))
    .then(() => {
      // A chart wider than its card is cut or scrolls off the page: name each one.
      const over = charts.filter(c => {
        const svg = document.querySelector('#' + c.id + ' svg'), card = document.getElementById(c.id).closest('section');
        return svg && card && svg.getBoundingClientRect().right > card.getBoundingClientRect().right + 1;
      }).map(c => c.id);
      if (over.length) document.body.setAttribute('data-overflow', over.join(' '));
      document.body.setAttribute('data-rendered', String(charts.length));
      document.title = document.title + ' [rendered]';
    })
    .catch(err => { window.iotwinError('chart rendering failed: ' + (err && err.message ? err.message : err)); });
})();
