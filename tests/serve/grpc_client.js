// A gRPC client Tessera did not write (@grpc/grpc-js + @grpc/proto-loader, pure JavaScript) that
// runs the calls a test lists and reports what came back; the Python tests check the answers.
//
//   node grpc_client.js ADDRESS STEPS.json RESULTS.json
//
// STEPS.json: a list of steps, run in order. A step is
//   {"rpc": "ModelInfer", "request": {...}, "deadline_ms": N?, "cancel_after_ms": N?, "delay_ms": N?,
//    "max_receive": N?}  (delay_ms: wait that long before calling; calls share one channel)
//   {"parallel": [step, ...]}                  (started together, awaited together)
//   {"encode": "ModelInferRequest", "request": {...}}   (the message's bytes, hex, without a call)
//   {"rpc": "Check", "service": "health", "request": {...}}
// Requests and responses are proto-loader objects: int64 as strings, bytes as base64, enums as names.
'use strict';
const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const [address, stepsPath, resultsPath] = process.argv.slice(2);
const here = __dirname;
const options = {keepCase: true, longs: String, enums: String, bytes: String, defaults: true, oneofs: true,
                 includeDirs: [path.join(here, '..', '..', 'src', 'serve'), here]};
const definition = loader.loadSync(['proto/inference.proto', 'health.proto'], options);
const proto = grpc.loadPackageDefinition(definition);

const clients = {};
function client(service, maxReceive) {
  const key = (service || 'inference') + ':' + (maxReceive || -1);
  if (!clients[key]) clients[key] = makeClient(service, maxReceive);
  return clients[key];
}

function makeClient(service, maxReceive) {
  const channelOptions = {'grpc.max_receive_message_length': maxReceive || -1, 'grpc.max_send_message_length': -1};
  if (service === 'health') return new proto.grpc.health.v1.Health(address, grpc.credentials.createInsecure(), channelOptions);
  return new proto.inference.GRPCInferenceService(address, grpc.credentials.createInsecure(), channelOptions);
}

function call(step) {
  if (step.delay_ms) {
    const {delay_ms, ...rest} = step;
    return new Promise((resolve) => setTimeout(resolve, delay_ms)).then(() => call(rest));
  }
  if (step.encode) {
    const bytes = definition['inference.' + step.encode].serialize(step.request);
    return Promise.resolve({ok: true, hex: Buffer.from(bytes).toString('hex')});
  }
  const c = client(step.service, step.max_receive);
  const started = Date.now();
  return new Promise((resolve) => {
    const callOptions = step.deadline_ms ? {deadline: new Date(Date.now() + step.deadline_ms)} : {};
    const handle = c[step.rpc](step.request || {}, callOptions, (err, response) => {
      const ms = Date.now() - started;
      if (err) resolve({ok: false, code: grpc.status[err.code], details: err.details, ms});
      else resolve({ok: true, response, ms});
    });
    if (step.cancel_after_ms) setTimeout(() => handle.cancel(), step.cancel_after_ms);
  });
}

async function run(steps) {
  const results = [];
  for (const step of steps) {
    if (step.parallel) results.push(await Promise.all(step.parallel.map(call)));
    else results.push(await call(step));
  }
  return results;
}

run(JSON.parse(fs.readFileSync(stepsPath, 'utf8'))).then(
    (results) => {
      fs.writeFileSync(resultsPath, JSON.stringify(results));
      for (const c of Object.values(clients)) c.close();
    },
    (e) => { console.error(e); process.exit(1); });
