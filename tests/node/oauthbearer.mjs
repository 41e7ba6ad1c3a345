// SASL/OAUTHBEARER (KIP-255) from @platformatic/kafka: its clients authenticate with the
// bearer token in args.token (an unsecured JWS or a signed JWT, made by the Python test).
// args: { token, action, topic, group, count, validate }
//   action 'produce-consume': send `count` records, read them back in group `group`
//   action 'produce': send one record (a principal without ACLs: its error codes)
//   action 'connect': list topics (a refused token: the connect error)
//   validate: the client's own check of the server's answer (RFC 7628's JSON challenge),
//   jwtValidateAuthenticationBytes; without it the client goes on after the challenge.
import { args, bootstrap, describeError, kafka, report, take } from './common.mjs'

const { Admin, Producer, Consumer, stringSerializers, stringDeserializers, MessagesStreamModes, saslOAuthBearer } = kafka
const sasl = { mechanism: 'OAUTHBEARER', token: args.token }
if (args.validate) sasl.authBytesValidator = saslOAuthBearer.jwtValidateAuthenticationBytes
const common = { bootstrapBrokers: bootstrap, sasl, retries: 1, retryDelay: 200, timeout: 10000 }

const within = (ms, promise) => Promise.race([promise, new Promise((_resolve, reject) =>
  setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())])
const quietly = promise => within(5000, promise).catch(() => {})

const clients = []
function client (Kind, options) {
  const c = new Kind({ ...common, ...options })
  clients.push(c)
  return c
}

async function run () {
  if (args.action === 'connect') {
    const admin = client(Admin, { clientId: 'node-oauth-admin' })
    return { topics: await within(20000, admin.listTopics()) }
  }
  const producer = client(Producer, { clientId: 'node-oauth-producer', serializers: stringSerializers })
  const count = args.action === 'produce' ? 1 : args.count
  const messages = []
  for (let i = 0; i < count; i++) messages.push({ topic: args.topic, key: `k${i}`, value: `v${i}` })
  await within(20000, producer.send({ messages }))
  if (args.action === 'produce') return { sent: messages.length }
  const consumer = client(Consumer, {
    clientId: 'node-oauth-consumer', groupId: args.group, deserializers: stringDeserializers
  })
  const stream = await within(20000, consumer.consume({ topics: [args.topic], mode: MessagesStreamModes.EARLIEST }))
  const consumed = await within(30000, take(stream, count))
  await quietly(stream.close())
  return { sent: messages.length, consumed: consumed.map(m => m.value) }
}

let result
try {
  result = await run()
} catch (error) {
  result = { error: describeError(error), names: errorNames(error) }
}
for (const c of clients.reverse()) await quietly(c instanceof Admin ? c.close() : c.close(true))
report(result)
process.exit(0)

// the client's error class names, nested causes and errors included
function errorNames (error) {
  const names = []
  const walk = (e, depth) => {
    if (!e || depth > 6) return
    names.push(`${e.constructor?.name}: ${e.message}`)
    for (const inner of e.errors ?? []) walk(inner, depth + 1)
    if (e.cause) walk(e.cause, depth + 1)
  }
  walk(error, 0)
  return names
}
