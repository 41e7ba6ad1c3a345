// What every scenario here shares: the client library (its path from KBROKER_NODE_KAFKA,
// set by tests/integration/node_support.py), the broker's address, and how a result goes
// back to the Python test: one JSON line on stdout. Errors print their Kafka error codes
// (the client's ResponseError / MultipleErrors) so a test can assert on them.
export const kafka = await import(process.env.KBROKER_NODE_KAFKA)
export const bootstrap = [process.env.KBROKER_BOOTSTRAP]
export const args = JSON.parse(process.argv[2] ?? '{}')

export function report (result) {
  process.stdout.write(JSON.stringify(result, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)) + '\n')
}

// the Kafka error codes inside a client error, nested errors and per-partition responses included
export function errorCodes (error) {
  const codes = []
  const walk = (e, depth) => {
    if (!e || depth > 6) return
    if (typeof e.apiCode === 'number') codes.push(e.apiCode)
    if (e.response) collectCodes(e.response, codes)
    for (const inner of e.errors ?? []) walk(inner, depth + 1)
    if (e.cause) walk(e.cause, depth + 1)
  }
  walk(error, 0)
  return codes
}

function collectCodes (value, codes) {
  if (Array.isArray(value)) {
    value.forEach(v => collectCodes(v, codes))
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === 'errorCode' && typeof v === 'number') codes.push(v)
      else collectCodes(v, codes)
    }
  }
}

export function describeError (error) {
  return { message: String(error?.message ?? error), codes: errorCodes(error) }
}

// the first `count` messages of a stream, as { topic, partition, key, value }
export async function take (stream, count) {
  const got = []
  for await (const m of stream) {
    got.push({ topic: m.topic, partition: m.partition, key: m.key, value: m.value })
    if (got.length >= count) break
  }
  return got
}
