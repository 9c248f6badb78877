// Closed-loop load on an Open Inference Protocol server: CONCURRENCY clients, each sending its next
// request when the last one is answered, for SECONDS (after a 1 s warm-up whose requests are not
// counted). Prints one JSON line: {"requests", "errors", "seconds", "throughput", "p50_ms", "p90_ms",
// "p99_ms", "first_error"}. Requests carry the inputs as binary (HTTP: the binary tensor extension;
// gRPC: raw_input_contents) and ask for binary outputs.
//
//   node serve_load.js http|grpc HOST:PORT MODEL CONCURRENCY SECONDS INPUTS.json
// INPUTS.json: [{"name", "datatype", "shape", "file"}] with each tensor's raw bytes in its file.
// Needs NODE_PATH to hold @grpc/grpc-js and @grpc/proto-loader (tests/serve/node_modules).
'use strict';
const fs = require('fs');
const http = require('http');
const path = require('path');

const [protocol, address, model, concurrencyText, secondsText, inputsPath] = process.argv.slice(2);
const concurrency = Number(concurrencyText);
const seconds = Number(secondsText);
const inputs = JSON.parse(fs.readFileSync(inputsPath, 'utf8')).map((i) => ({...i, data: fs.readFileSync(i.file)}));

function httpSender() {
  const [host, port] = address.split(':');
  const agent = new http.Agent({keepAlive: true, maxSockets: concurrency});
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

async function main() {
  const send = protocol === 'grpc' ? grpcSender() : httpSender();
  const latencies = [];
  let errors = 0;
  let firstError = null;
  const start = Date.now();
  const measureFrom = start + 1000;
  const end = measureFrom + seconds * 1000;
  async function worker() {
    while (Date.now() < end) {
      const t0 = process.hrtime.bigint();
      const error = await send();
      const t1 = process.hrtime.bigint();
      if (Date.now() < measureFrom) continue;
      if (error) {
        errors += 1;
        firstError = firstError || error;
      } else {
        latencies.push(Number(t1 - t0) / 1e6);
      }
    }
  }
  await Promise.all(Array.from({length: concurrency}, worker));
  latencies.sort((a, b) => a - b);
  const q = (p) => latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : null;
  const elapsed = (Date.now() - measureFrom) / 1000;
  console.log(JSON.stringify({requests: latencies.length, errors, seconds: elapsed, throughput: latencies.length / elapsed,
                              p50_ms: q(0.5), p90_ms: q(0.9), p99_ms: q(0.99), first_error: firstError}));
  process.exit(0);
}

main();
