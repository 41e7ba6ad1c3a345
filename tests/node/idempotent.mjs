// An idempotent producer of @platformatic/kafka (it sends InitProducerId with producer id 0
// and epoch 0, not -1/-1) sends and its records are read back. args: { topic, count }
import { args, bootstrap, describeError, kafka, report, take } from './common.mjs'

const { Admin, Producer, Consumer, stringSerializers, stringDeserializers, MessagesStreamModes } = kafka
const admin = new Admin({ clientId: 'node-admin', bootstrapBrokers: bootstrap })
const producer = new Producer({
  clientId: 'node-idempotent', bootstrapBrokers: bootstrap, serializers: stringSerializers, idempotent: true
})
const consumer = new Consumer({
  clientId: 'node-consumer', groupId: `${args.topic}-g`, bootstrapBrokers: bootstrap, deserializers: stringDeserializers
})
try {
  await admin.createTopics({ topics: [args.topic], partitions: 1, replicas: 1 })
  const messages = []
  for (let i = 0; i < args.count; i++) messages.push({ topic: args.topic, key: `k${i}`, value: `v${i}` })
  let sent
  try {
    sent = { offsets: (await producer.send({ messages })).offsets?.length ?? null }
  } catch (error) {
    sent = { error: describeError(error) }
  }
  let consumed = []
  if (!sent.error) {
    const stream = await consumer.consume({ topics: [args.topic], mode: MessagesStreamModes.EARLIEST })
    consumed = await take(stream, args.count)
    await stream.close()
  }
  report({ sent, consumed })
} finally {
  await consumer.close(true)
  await producer.close()
  await admin.close()
}
