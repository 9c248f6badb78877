// Greedy decoding through ONNX Runtime's CPU provider (onnxruntime-node) on a decoder exported by
// bench/decoder.py (ids, past_k_L/past_v_L in; logits, present_k_L/present_v_L out): the prompt, then
// one token a step with the present cache fed back as the past, as run_generation.py's Tessera loop
// does. Prints one JSON line: {"create_ms", "step_ms": [...], "tokens": [...]}.
// Usage: node ort_generate.js MODEL THREADS LAYERS HEADS HEAD_DIM NEW_TOKENS PROMPT_ID,PROMPT_ID,...
'use strict';
const ort = require('onnxruntime-node');

async function main() {
  const [model, threads, layers, heads, headDim, newTokens, promptText] = process.argv.slice(2);
  const start = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const createMs = Number(process.hrtime.bigint() - start) / 1e6;
  const prompt = promptText.split(',').map((t) => BigInt(t));
  let ids = new ort.Tensor('int64', BigInt64Array.from(prompt), [1, prompt.length]);
  const past = [];
  for (let i = 0; i < 2 * Number(layers); i++) {
    past.push(new ort.Tensor('float32', new Float32Array(0), [1, Number(heads), 0, Number(headDim)]));
  }
  const stepMs = [];
  const tokens = [];
  for (let step = 0; step < Number(newTokens); step++) {
    const feeds = { ids };
    for (let i = 0; i < Number(layers); i++) {
      feeds[`past_k_${i}`] = past[2 * i];
      feeds[`past_v_${i}`] = past[2 * i + 1];
    }
    const t = process.hrtime.bigint();
    const out = await session.run(feeds);
    stepMs.push(Number(process.hrtime.bigint() - t) / 1e6);
    const logits = out.logits;
    const vocab = logits.dims[2];
    const last = logits.data.subarray((logits.dims[1] - 1) * vocab, logits.dims[1] * vocab);
    let best = 0;
    for (let v = 1; v < vocab; v++) if (last[v] > last[best]) best = v;
    tokens.push(best);
    for (let i = 0; i < Number(layers); i++) {
      past[2 * i] = out[`present_k_${i}`];
      past[2 * i + 1] = out[`present_v_${i}`];
    }
    ids = new ort.Tensor('int64', BigInt64Array.from([BigInt(best)]), [1, 1]);
  }
  console.log(JSON.stringify({ create_ms: createMs, step_ms: stepMs, tokens }));
}

main().catch((e) => { console.error(e.message || e); process.exit(1); });
