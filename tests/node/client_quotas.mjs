// AlterClientQuotas then DescribeClientQuotas through @platformatic/kafka, entity parts
// and keys sent in the order args gives them. args: { entity: [[type, name]...], ops:
// [[key, value]...], components: [[type, matchType, match]...] }
import { args, bootstrap, kafka, report } from './common.mjs'

const admin = new kafka.Admin({ clientId: 'node-admin', bootstrapBrokers: bootstrap })
try {
  const entities = args.entity.map(([entityType, entityName]) => ({ entityType, entityName }))
  const altered = await admin.alterClientQuotas({
    entries: [{ entities, ops: args.ops.map(([key, value]) => ({ key, value, remove: false })) }]
  })
  const components = args.components.map(([entityType, matchType, match]) => ({ entityType, matchType, match }))
  const described = await admin.describeClientQuotas({ components, strict: false })
  report({ altered, described })
} finally {
  await admin.close()
}
