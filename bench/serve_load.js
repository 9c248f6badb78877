// Load on an Open Inference Protocol server, in one of two ways, for SECONDS (after a 1 s warm-up whose
// requests are not counted):
//  - closed loop (LOAD a number C): C clients, each sending its next request when the last one is answered;
//  - open loop (LOAD "rate=R"): requests arrive at R a second as a Poisson process (seeded, so every run
//    sees the same arrivals), each sent when it arrives whatever is outstanding; a latency counts from
//    the arrival's scheduled time, so a client that falls behind does not hide the server's queueing
//    (no coordinated omission).
// Prints one JSON line: {"requests", "errors", "seconds", "throughput", "p50_ms", "p90_ms", "p99_ms",
// "max_outstanding", "arrival_rate" (open loop: the arrivals in the measured window a second, which a
// Poisson process's draws put around R), "first_error"}. Requests carry the inputs as binary (HTTP: the binary tensor
// extension; gRPC: raw_input_contents) and ask for binary outputs.
//
//   node serve_load.js http|grpc HOST:PORT MODEL C|rate=R SECONDS INPUTS.json
// INPUTS.json: [{"name", "datatype", "shape", "file"}] with each tensor's raw bytes in its file.
// Needs NODE_PATH to hold @grpc/grpc-js and @grpc/proto-loader (tests/serve/node_modules).
'use strict';
const fs = require('fs');
const http = require('http');
const path = require('path');

const [protocol, address, model, loadText, secondsText, inputsPath] = process.argv.slice(2);
const rate = loadText.startsWith('rate=') ? Number(loadText.slice(5)) : null;
const concurrency = rate === null ? Number(loadText) : Infinity;
if (rate !== null ? !(rate > 0) : !(concurrency >= 1)) throw new Error(`bad load '${loadText}': a client count or rate=R`);
const seconds = Number(secondsText);
const inputs = JSON.parse(fs.readFileSync(inputsPath, 'utf8')).map((i) => ({...i, data: fs.readFileSync(i.file)}));

function httpSender() {
  const [host, port] = address.split(':');
  const agent = new http.Agent({keepAlive: true, maxSockets: concurrency});  // Infinity in an open loop
  const header = Buffer.from(JSON.stringify({
    inputs: inputs.map((i) => ({name: i.name, datatype: i.datatype, shape: i.shape,
                                parameters: {binary_data_size: i.data.length}})),
    parameters: {binary_data_output: true},
  }));
  const body = Buffer.concat([header, ...inputs.map((i) => i.data)]);
  return () => new Promise((resolve) => {
    const req = http.request({host, port, agent, method: 'POST', path: `/v2/models/${model}/infer`, headers: {
      'Content-Type': 'application/octet-stream', 'Content-Length': body.length,
      'Inference-Header-Content-Length': header.length}}, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve(res.statusCode === 200 ? null : `HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString().slice(0, 200)}`));
    });
    req.on('error', (e) => resolve(String(e)));
    req.end(body);
  });
}

function grpcSender() {
  const grpc = require('@grpc/grpc-js');
  const loader = require('@grpc/proto-loader');
  const definition = loader.loadSync('proto/inference.proto', {
    keepCase: true, longs: String, enums: String, defaults: false,
    includeDirs: [path.join(__dirname, '..', 'src', 'serve')]});
  const proto = grpc.loadPackageDefinition(definition);
  const client = new proto.inference.GRPCInferenceService(address, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1});
  const request = {model_name: model, inputs: inputs.map((i) => ({name: i.name, datatype: i.datatype, shape: i.shape})),
                   raw_input_contents: inputs.map((i) => i.data)};
  return () => new Promise((resolve) => client.ModelInfer(request, (err) => resolve(err ? `gRPC ${err.code}: ${err.details}` : null)));
}

/// Exponential gaps of mean 1/rate from a fixed-seed generator (mulberry32): the same arrivals every run.
function arrivals(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const u = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    return -Math.log(1 - u) / rate * 1000;
  };
}

async function main() {
  const send = protocol === 'grpc' ? grpcSender() : httpSender();
  const latencies = [];
  let errors = 0;
  let firstError = null;
  let outstanding = 0;
  let maxOutstanding = 0;
  let arrived = 0;  // open loop: arrivals within the measured window
  const start = Date.now();
  const measureFrom = start + 1000;
  const end = measureFrom + seconds * 1000;
  // One request from `t0` (ms, performance.now()'s clock) to its answer.
  async function one(t0) {
    outstanding += 1;
    maxOutstanding = Math.max(maxOutstanding, outstanding);
    const error = await send();
    const t1 = performance.now();
    outstanding -= 1;
    if (Date.now() - (t1 - t0) < measureFrom) return;
    if (error) {
      errors += 1;
      firstError = firstError || error;
    } else {
      latencies.push(t1 - t0);
    }
  }
  if (rate === null) {
    async function worker() {
      while (Date.now() < end) await one(performance.now());
    }
    await Promise.all(Array.from({length: concurrency}, worker));
  } else {
    const gap = arrivals(12345);
    const pending = [];
    const origin = performance.now();
    const stop = origin + (end - start);
    let next = origin;
    while (next < stop) {
      const wait = next - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      pending.push(one(next));  // latency from the scheduled arrival, even when the timer fired late
      if (next - origin >= measureFrom - start) arrived += 1;
      next += gap();
    }
    await Promise.all(pending);
  }
  latencies.sort((a, b) => a - b);
  const q = (p) => latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : null;
  const elapsed = (Date.now() - measureFrom) / 1000;
  console.log(JSON.stringify({requests: latencies.length, errors, seconds: elapsed, throughput: latencies.length / elapsed,
                              p50_ms: q(0.5), p90_ms: q(0.9), p99_ms: q(0.99), max_outstanding: maxOutstanding,
                              arrival_rate: rate === null ? null : arrived / seconds, first_error: firstError}));
  process.exit(0);
}

main();
