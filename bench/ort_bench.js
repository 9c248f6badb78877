// Times one ONNX model with ONNX Runtime's CPU provider (onnxruntime-node),
// on inputs read from .npy files, and prints one JSON line:
//   {"median_ms": ..., "p10_ms": ..., "p90_ms": ...}
// Usage: node ort_bench.js MODEL THREADS WARMUP ITERATIONS NAME=FILE.npy ...
// With ORT_OUTPUTS=DIR it also writes each output of the last run as DIR/NAME.npy
// (the reference outputs of the scripts that compare Tessera with ONNX Runtime).
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

const kTypes = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array], '|b1': ['bool', Uint8Array],
  '<f2': ['float16', Uint16Array],
};

function readNpy(path) {
  const bytes = fs.readFileSync(path);
  if (bytes.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(path + ': not a .npy file');
  const major = bytes[6];
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = bytes.toString('latin1', start, start + headerLength);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  if (!kTypes[descr]) throw new Error(path + ': unsupported dtype ' + descr);
  const [type, Array] = kTypes[descr];
  const offset = start + headerLength;
  const data = new Array(bytes.buffer.slice(bytes.byteOffset + offset, bytes.byteOffset + bytes.length));
  return new ort.Tensor(type, type === 'bool' ? Uint8Array.from(data).map((v) => v !== 0) : data, shape);
}

function writeNpy(path, tensor) {
  const descr = Object.keys(kTypes).find((d) => kTypes[d][0] === tensor.type);
  if (!descr) throw new Error(path + ': cannot write dtype ' + tensor.type);
  const shape = tensor.dims.length === 1 ? tensor.dims[0] + ',' : tensor.dims.join(', ');
  let header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + '), }';
  header += ' '.repeat(63 - ((header.length + 10) % 64)) + '\n';
  const prefix = Buffer.alloc(10);
  prefix.write('\x93NUMPY', 0, 'latin1');
  prefix[6] = 1;
  prefix.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(path, Buffer.concat([prefix, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const [model, threads, warmup, iterations, ...inputs] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const spec of inputs) {
    const eq = spec.lastIndexOf('=');
    feeds[spec.slice(0, eq)] = readNpy(spec.slice(eq + 1));
  }
  for (let i = 0; i < Number(warmup); i++) await session.run(feeds);
  const times = [];
  let results = null;
  for (let i = 0; i < Number(iterations); i++) {
    const start = process.hrtime.bigint();
    results = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  if (process.env.ORT_OUTPUTS) {
    if (!results) results = await session.run(feeds);
    fs.mkdirSync(process.env.ORT_OUTPUTS, { recursive: true });
    for (const name of session.outputNames) writeNpy(process.env.ORT_OUTPUTS + '/' + name + '.npy', results[name]);
  }
  times.sort((a, b) => a - b);
  const at = (p) => {
    const pos = p * (times.length - 1), lo = Math.floor(pos), hi = Math.min(lo + 1, times.length - 1);
    return times[lo] + (times[hi] - times[lo]) * (pos - lo);
  };
  console.log(JSON.stringify({ median_ms: at(0.5), p10_ms: at(0.1), p90_ms: at(0.9) }));
}

main().catch((e) => { console.error(e.message || e); process.exit(1); });
