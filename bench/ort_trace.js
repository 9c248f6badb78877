// Runs a trace of calls at changing input shapes through ONNX Runtime's CPU
// provider (onnxruntime-node), timing the session's creation and every call,
// and prints one JSON line: {"create_ms", "call_ms": [...], "rss_mb_after": {N: MB}, "checksum": [...]}.
// Usage: node ort_trace.js MODEL THREADS TRACE.json
// TRACE.json: {"inputs": [{"name": ..., "dtype": "float32"|"int64"}], "calls": [[shape, ...], ...],
//              "rss_at": [N, ...]}: each call gives one shape per input. The input data is a function
// of the element index and the call (trace_value below; run_shape_churn.py computes the same), so
// that both runtimes see the same values, and the checksum of each call's first output (sum of
// |x|) lets the driver check that they agree.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

function traceValue(i, call) {
  return Math.fround(((i * 7 + call * 13) % 101) / 101 - 0.5);
}

function makeTensor(spec, shape, call) {
  const count = shape.reduce((a, b) => a * b, 1);
  if (spec.dtype === 'int64') {
    const data = new BigInt64Array(count);
    for (let i = 0; i < count; i++) data[i] = BigInt((i * 7 + call * 13) % spec.vocab);
    return new ort.Tensor('int64', data, shape);
  }
  const data = new Float32Array(count);
  for (let i = 0; i < count; i++) data[i] = traceValue(i, call);
  return new ort.Tensor('float32', data, shape);
}

async function main() {
  const [model, threads, tracePath] = process.argv.slice(2);
  const trace = JSON.parse(fs.readFileSync(tracePath, 'utf8'));
  const start = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const createMs = Number(process.hrtime.bigint() - start) / 1e6;
  const callMs = [];
  const checksum = [];
  const rss = {};
  for (let c = 0; c < trace.calls.length; c++) {
    const feeds = {};
    trace.inputs.forEach((spec, k) => { feeds[spec.name] = makeTensor(spec, trace.calls[c][k], c); });
    const t = process.hrtime.bigint();
    const results = await session.run(feeds);
    callMs.push(Number(process.hrtime.bigint() - t) / 1e6);
    const first = results[session.outputNames[0]].data;
    let sum = 0;
    for (let i = 0; i < first.length; i++) sum += Math.abs(first[i]);
    checksum.push(sum);
    if (trace.rss_at.includes(c + 1)) rss[c + 1] = process.memoryUsage().rss / (1 << 20);
  }
  console.log(JSON.stringify({ create_ms: createMs, call_ms: callMs, rss_mb_after: rss, checksum }));
}

main().catch((e) => { console.error(e.message || e); process.exit(1); });
