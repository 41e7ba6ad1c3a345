// Admin createTopics/listTopics, a producer's send and a group consumer's read, through
// @platformatic/kafka. args: { topic, group, count }
import { args, bootstrap, kafka, report, take } from './common.mjs'

const { Admin, Producer, Consumer, stringSerializers, stringDeserializers, MessagesStreamModes } = kafka
const admin = new Admin({ clientId: 'node-admin', bootstrapBrokers: bootstrap })
const producer = new Producer({ clientId: 'node-producer', bootstrapBrokers: bootstrap, serializers: stringSerializers })
const consumer = new Consumer({
  clientId: 'node-consumer', groupId: args.group, bootstrapBrokers: bootstrap, deserializers: stringDeserializers
})
try {
  const created = await admin.createTopics({ topics: [args.topic], partitions: 3, replicas: 1 })
  const listed = await admin.listTopics()
  const messages = []
  for (let i = 0; i < args.count; i++) {
    messages.push({ topic: args.topic, key: `k${i}`, value: `v${i}`, partition: i % 3 })
  }
  const sent = await producer.send({ messages })
  const stream = await consumer.consume({ topics: [args.topic], mode: MessagesStreamModes.EARLIEST })
  const consumed = await take(stream, args.count)
  await stream.close()
  report({
    created: created.map(t => ({ name: t.name, partitions: t.partitions })),
    listed,
    sent: sent.offsets?.length ?? null,
    consumed
  })
} finally {
  await consumer.close(true)
  await producer.close()
  await admin.close()
}
