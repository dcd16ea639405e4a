// The loopback provider for run_proxy_bench.py: answers POST /v1/messages
// like the Anthropic Messages API, as fast as node:http can, with a fresh
// message id per answer. JSON unless the body says "stream": true; then
// STREAM_EVENTS events, the first at once and the others GAP_MS apart, so
// that time to first byte and to the last byte are both measurable.
// Prints {"listening": "127.0.0.1:PORT"} on stdout.
import { createServer } from 'node:http';

const STREAM_EVENTS = 8;
const GAP_MS = 2;
let n = 0;

const usage = { input_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 20000,
  cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 }, output_tokens: 12 };

createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks).toString();
  const id = `msg_${++n}`;
  const message = { id, type: 'message', role: 'assistant', model: 'claude-sonnet-4-6',
    content: [{ type: 'text', text: 'hello' }], stop_reason: 'end_turn', stop_sequence: null, usage };
  if (!body.includes('"stream":true')) {
    res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_${n}` });
    res.end(JSON.stringify(message));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'request-id': `req_${n}` });
  const events = [
    ['message_start', { type: 'message_start', message: { ...message, content: [], stop_reason: null } }],
    ...Array.from({ length: STREAM_EVENTS - 2 }, (_, i) =>
      ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: `t${i}` } }]),
    ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 12 } }],
  ];
  for (let i = 0; i < events.length; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, GAP_MS));
    res.write(`event: ${events[i][0]}\ndata: ${JSON.stringify(events[i][1])}\n\n`);
  }
  res.end();
}).listen(0, '127.0.0.1', function () {
  process.stdout.write(JSON.stringify({ listening: `127.0.0.1:${this.address().port}` }) + '\n');
});
