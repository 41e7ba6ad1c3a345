// OffsetDelete (admin deleteConsumerGroupOffsets) on a Stable classic group whose member is
// this client's consumer, subscribed to args.subscribed only; the group's offsets for both
// topics are committed first, while the group is Empty. args: { group, subscribed, other }
import { args, bootstrap, describeError, kafka, report, take } from './common.mjs'

const { Admin, Producer, Consumer, stringSerializers, stringDeserializers, MessagesStreamModes } = kafka
const admin = new Admin({ clientId: 'node-admin', bootstrapBrokers: bootstrap })
const producer = new Producer({ clientId: 'node-producer', bootstrapBrokers: bootstrap, serializers: stringSerializers })
const consumer = new Consumer({
  clientId: 'node-consumer', groupId: args.group, bootstrapBrokers: bootstrap, deserializers: stringDeserializers
})
const attempt = async fn => {
  try {
    return { ok: await fn() }
  } catch (error) {
    return { error: describeError(error) }
  }
}
const offsets = async () =>
  (await admin.listConsumerGroupOffsets({ groups: [args.group] }))
    .flatMap(g => g.topics.map(t => t.name))
    .sort()
try {
  await admin.createTopics({ topics: [args.subscribed, args.other], partitions: 1, replicas: 1 })
  await producer.send({ messages: [{ topic: args.subscribed, key: 'k', value: 'v' }] })
  await admin.alterConsumerGroupOffsets({
    groupId: args.group,
    topics: [args.subscribed, args.other].map(name => ({ name, partitionOffsets: [{ partition: 0, offset: 0n }] }))
  })
  const before = await offsets()
  const stream = await consumer.consume({ topics: [args.subscribed], mode: MessagesStreamModes.EARLIEST })
  await take(stream, 1) // the member has joined: the group is Stable
  const state = (await admin.describeGroups({ groups: [args.group] })).get(args.group)?.state
  const other = await attempt(() => admin.deleteConsumerGroupOffsets({
    groupId: args.group, topics: [{ name: args.other, partitionIndexes: [0] }]
  }))
  const subscribed = await attempt(() => admin.deleteConsumerGroupOffsets({
    groupId: args.group, topics: [{ name: args.subscribed, partitionIndexes: [0] }]
  }))
  const after = await offsets()
  await stream.close()
  report({ before, state, other, subscribed, after })
} finally {
  await consumer.close(true)
  await producer.close()
  await admin.close()
}
