#!/usr/bin/env node
// kafkajs 2.x checks against a Kafka-protocol broker (Twinlog or Apache Kafka).
//
//   node kafkajs_check.js SCENARIO --bootstrap HOST:PORT [--topic-prefix P] [--timeout SECONDS]
//
// SCENARIO is one of: produce-consume, groups, idempotence, transactions, admin.
// Progress goes to stderr; the last stdout line is one JSON object
// {"scenario":...,"ok":true|false,...}; the exit code is 0 on success and 1 on failure.
// Every wait is bounded by the scenario deadline (--timeout, 60 s by default) and the
// process always exits.
'use strict'

const {
  Kafka,
  logLevel,
  CompressionTypes,
  Partitioners,
  ConfigResourceTypes,
  AssignerProtocol,
} = require('kafkajs')

const SCENARIOS = {
  'produce-consume': produceConsume,
  groups,
  idempotence,
  transactions,
  admin: adminScenario,
  // Internal: the group member that `groups` runs in a child process and SIGKILLs.
  __member: memberProcess,
}

// ---------------------------------------------------------------------------------------
// Arguments, logging, deadlines

function usage(msg) {
  if (msg) process.stderr.write(`kafkajs_check: ${msg}\n`)
  process.stderr.write(
    'usage: node kafkajs_check.js SCENARIO --bootstrap HOST:PORT [--topic-prefix P] [--timeout SECONDS]\n' +
      `scenarios: ${Object.keys(SCENARIOS).filter(n => !n.startsWith('__')).join(', ')}\n`
  )
  process.exit(2)
}

function parseArgs(argv) {
  const opts = { scenario: null, bootstrap: null, prefix: null, timeoutS: 60 }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const next = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`)
      return argv[++i]
    }
    if (a === '--bootstrap') opts.bootstrap = next()
    else if (a === '--topic-prefix') opts.prefix = next()
    else if (a === '--timeout') opts.timeoutS = Number(next())
    else if (a === '-h' || a === '--help') usage()
    else if (a.startsWith('--')) usage(`unknown option ${a}`)
    else if (opts.scenario === null) opts.scenario = a
    else usage(`unexpected argument ${a}`)
  }
  if (!opts.scenario || !SCENARIOS[opts.scenario]) usage(`unknown scenario ${opts.scenario}`)
  if (!opts.bootstrap) usage('--bootstrap is required')
  if (!(opts.timeoutS > 0)) usage('--timeout must be a positive number of seconds')
  if (!opts.prefix) opts.prefix = `kjs-${Date.now().toString(36)}-${process.pid}`
  return opts
}

const OPTS = parseArgs(process.argv.slice(2))
const STARTED = Date.now()
const DEADLINE = STARTED + OPTS.timeoutS * 1000
const kafkaWarnings = []

function log(...parts) {
  const t = ((Date.now() - STARTED) / 1000).toFixed(1).padStart(5)
  process.stderr.write(`[${t}s ${OPTS.scenario}] ${parts.join(' ')}\n`)
}

// kafkajs' own log lines, to stderr, one line each (WARN and ERROR only).
const logCreator = () => ({ namespace, label, log: entry }) => {
  const { message, timestamp, logger, ...rest } = entry
  const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : ''
  const line = `[kafkajs ${label}] ${namespace}: ${message}${extra}`
  if (kafkaWarnings.length < 50) kafkaWarnings.push(line.slice(0, 400))
  process.stderr.write(`${line}\n`)
}

class CheckError extends Error {}

function check(cond, msg) {
  if (!cond) throw new CheckError(msg)
}

function eq(actual, expected, what) {
  const a = JSON.stringify(actual)
  const e = JSON.stringify(expected)
  if (a !== e) throw new CheckError(`${what}: expected ${e}, got ${a}`)
}

function remainingMs() {
  return DEADLINE - Date.now()
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// A fatal consumer crash (kafkajs gave up) fails the scenario at the next wait.
let fatalError = null

// Runs promise (or a function returning one) within the scenario deadline.
async function bounded(what, p, capMs) {
  const limit = Math.max(0, Math.min(remainingMs(), capMs || Infinity))
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new CheckError(`timed out after ${limit} ms: ${what}`)),
      limit
    )
  })
  try {
    return await Promise.race([typeof p === 'function' ? p() : p, timeout])
  } finally {
    clearTimeout(timer)
  }
}

// Polls cond (sync or async) until it returns a truthy value; describe() says what was
// last seen when the deadline passes.
async function waitFor(what, cond, describe, pollMs = 100) {
  let lastError = null
  for (;;) {
    if (fatalError) throw fatalError
    let timedOut = false
    try {
      const v = await bounded(what, cond)
      if (v) return v
      lastError = null
    } catch (e) {
      if (e instanceof CheckError && /^timed out/.test(e.message)) timedOut = true
      else lastError = e
    }
    if (timedOut || remainingMs() <= 0) {
      const seen = describe ? `; last seen: ${describe()}` : ''
      const err = lastError ? `; last error: ${describeError(lastError)}` : ''
      throw new CheckError(`timed out waiting for ${what}${seen}${err}`)
    }
    await sleep(Math.min(pollMs, Math.max(1, remainingMs())))
  }
}

function describeError(e) {
  if (!e) return String(e)
  const parts = []
  let cur = e
  for (let depth = 0; cur && depth < 5; depth++) {
    let s = `${cur.name || 'Error'}: ${cur.message}`
    if (cur.type) s += ` [type=${cur.type}${cur.code !== undefined ? ` code=${cur.code}` : ''}]`
    if (Array.isArray(cur.errors) && cur.errors.length) {
      s += ` errors=${JSON.stringify(
        cur.errors.map(x => ({
          ...(x.groupId ? { groupId: x.groupId } : {}),
          ...(x.partition !== undefined ? { partition: x.partition } : {}),
          type: x.type || (x.error && x.error.type),
          message: x.message || (x.error && x.error.message),
        }))
      )}`
    }
    if (Array.isArray(cur.groups) && cur.groups.length) {
      s += ` groups=${JSON.stringify(
        cur.groups.map(x => ({ groupId: x.groupId, errorCode: x.errorCode, type: x.error && x.error.type }))
      )}`
    }
    if (Array.isArray(cur.partitions) && cur.partitions.length && cur.partitions[0].error) {
      s += ` partitions=${JSON.stringify(
        cur.partitions.map(x => ({ partition: x.partition, error: x.error && x.error.message }))
      )}`
    }
    parts.push(s)
    cur = cur.originalError || cur.cause
  }
  return parts.join(' <- ')
}

// The kafkajs error types (Kafka error names) anywhere in an error's chain.
function errorTypes(e, out = [], depth = 0) {
  if (!e || depth > 6) return out
  if (e.type && !out.includes(e.type)) out.push(e.type)
  for (const list of [e.errors, e.groups, e.partitions]) {
    if (Array.isArray(list)) for (const x of list) errorTypes(x.error || x, out, depth + 1)
  }
  errorTypes(e.originalError || e.cause, out, depth + 1)
  return out
}

// Runs fn, which must fail with a Kafka error of type `type`; returns the error.
async function expectError(what, fn, type) {
  let err = null
  try {
    await bounded(what, fn)
  } catch (e) {
    if (e instanceof CheckError && /^timed out/.test(e.message)) throw e
    err = e
  }
  check(err, `${what} succeeded; Kafka answers ${type}`)
  const types = errorTypes(err)
  check(types.includes(type), `${what}: expected error ${type}, got ${describeError(err)}`)
  log(`${what} failed as expected with ${type}`)
  return err
}

// ---------------------------------------------------------------------------------------
// Clients

const kafka = new Kafka({
  clientId: `kafkajs-check-${OPTS.scenario}`,
  brokers: [OPTS.bootstrap],
  logLevel: logLevel.WARN,
  logCreator,
  connectionTimeout: 5000,
  requestTimeout: 30000,
  retry: { initialRetryTime: 100, retries: 8 },
})

const clients = []

function track(client, name) {
  clients.push({ client, name })
  return client
}

function newAdmin() {
  return track(kafka.admin(), 'admin')
}

function newProducer(config = {}, name = 'producer') {
  return track(
    kafka.producer({
      createPartitioner: Partitioners.DefaultPartitioner,
      allowAutoTopicCreation: false,
      ...config,
    }),
    name
  )
}

function newConsumer(config, name = 'consumer') {
  const consumer = kafka.consumer({
    sessionTimeout: 10000,
    rebalanceTimeout: 20000,
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 250,
    allowAutoTopicCreation: false,
    ...config,
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    log(`${name} crashed (restart=${payload.restart}): ${describeError(payload.error)}`)
    if (!payload.restart && !fatalError) {
      fatalError = new CheckError(
        `${name} crashed and kafkajs will not restart it: ${describeError(payload.error)}`
      )
    }
  })
  return track(consumer, name)
}

async function disconnect(client, name) {
  const i = clients.findIndex(c => c.client === client)
  if (i >= 0) clients.splice(i, 1)
  await bounded(`${name} disconnect`, () => client.disconnect(), 15000)
}

const children = []
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL')
})

async function disconnectAll() {
  for (const child of children.splice(0)) child.kill('SIGKILL')
  const all = clients.splice(0).reverse()
  await Promise.all(
    all.map(async ({ client, name }) => {
      let timer
      try {
        await Promise.race([
          client.disconnect(),
          new Promise(resolve => {
            timer = setTimeout(() => {
              log(`${name}: disconnect did not finish in 10 s`)
              resolve()
            }, 10000)
          }),
        ])
      } catch (e) {
        log(`${name}: disconnect failed: ${describeError(e)}`)
      } finally {
        clearTimeout(timer)
      }
    })
  )
}

// ---------------------------------------------------------------------------------------
// Shared helpers

const str = b => (b === null || b === undefined ? null : Buffer.isBuffer(b) ? b.toString('utf8') : String(b))
const hex = b => (b === null || b === undefined ? null : Buffer.from(b).toString('hex'))

// Headers as the consumer decodes them: each value a hex string, or an array for a
// repeated key.
function normHeaders(h) {
  const out = {}
  for (const k of Object.keys(h || {}).sort()) {
    const v = h[k]
    out[k] = Array.isArray(v) ? v.map(x => hex(Buffer.from(x))) : hex(Buffer.from(v))
  }
  return out
}

async function createTopic(admin, topic, numPartitions, configEntries) {
  const created = await bounded(`createTopics ${topic}`, () =>
    admin.createTopics({
      topics: [{ topic, numPartitions, replicationFactor: 1, configEntries }],
      waitForLeaders: true,
      timeout: 20000,
    })
  )
  check(created === true, `createTopics(${topic}) returned ${created} (expected true: a new topic)`)
  log(`created topic ${topic} with ${numPartitions} partitions`)
}

async function topicEnds(admin, topic) {
  const offsets = await bounded(`fetchTopicOffsets ${topic}`, () => admin.fetchTopicOffsets(topic))
  const ends = {}
  for (const o of offsets) ends[o.partition] = { low: o.low, high: o.high }
  return ends
}

async function groupOffsets(admin, groupId, topic) {
  const res = await bounded(`fetchOffsets ${groupId}`, () =>
    admin.fetchOffsets({ groupId, topics: [topic] })
  )
  const t = res.find(r => r.topic === topic)
  check(t, `fetchOffsets(${groupId}) has no entry for ${topic}: ${JSON.stringify(res)}`)
  const out = {}
  for (const p of t.partitions) out[p.partition] = p.offset
  return out
}

function highs(ends) {
  const out = {}
  for (const p of Object.keys(ends)) out[p] = ends[p].high
  return out
}

// What a group that consumed (and committed) everything has: the end offset of each
// partition, or -1 (nothing committed) for a partition that never had a record.
function committedAtEnd(ends) {
  const out = {}
  for (const p of Object.keys(ends)) out[p] = ends[p].high === '0' && ends[p].low === '0' ? '-1' : ends[p].high
  return out
}

// Starts a consumer that records every message; returns { consumer, records, state }.
async function startRecordingConsumer(name, config, topics, extra = {}) {
  const consumer = newConsumer(config, name)
  const state = { name, joins: 0, assignment: null, memberId: null, firstSinceJoin: {}, records: [] }
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    state.joins++
    state.memberId = payload.memberId
    state.assignment = (payload.memberAssignment[topics[0]] || []).slice().sort((a, b) => a - b)
    state.firstSinceJoin = {}
    log(`${name} joined ${payload.groupId} (generation join #${state.joins}) assignment ${JSON.stringify(payload.memberAssignment)}`)
  })
  await bounded(`${name} connect`, () => consumer.connect())
  await bounded(`${name} subscribe`, () => consumer.subscribe({ topics, fromBeginning: true }))
  await bounded(`${name} run`, () =>
    consumer.run({
      ...extra,
      eachMessage: async ({ topic, partition, message }) => {
        if (state.firstSinceJoin[partition] === undefined) {
          state.firstSinceJoin[partition] = message.offset
        }
        state.records.push({
          topic,
          partition,
          offset: message.offset,
          key: message.key,
          value: message.value,
          headers: message.headers,
          timestamp: message.timestamp,
        })
      },
    })
  )
  return { consumer, state }
}

// Reads a topic from the beginning with a fresh group until `count` records arrived, then
// `quietMs` more to catch any extra; returns the records.
async function readAll(name, topic, count, { readUncommitted = false, quietMs = 0, consumerConfig = {} } = {}) {
  const groupId = `${OPTS.prefix}-${name}`
  const { consumer, state } = await startRecordingConsumer(
    name,
    { groupId, readUncommitted, ...consumerConfig },
    [topic]
  )
  await waitFor(
    `${name} to read ${count} records from ${topic}`,
    () => state.records.length >= count,
    () => `${state.records.length} records, assignment ${JSON.stringify(state.assignment)}`
  )
  if (quietMs > 0) await sleep(Math.min(quietMs, Math.max(0, remainingMs() - 5000)))
  await disconnect(consumer, name)
  log(`${name} read ${state.records.length} records from ${topic}`)
  return state.records
}

// Per partition: offsets strictly increasing (and contiguous when `contiguous`).
function checkPartitionOffsets(records, { contiguous, from = {} }) {
  const byPart = {}
  for (const r of records) (byPart[r.partition] = byPart[r.partition] || []).push(BigInt(r.offset))
  for (const p of Object.keys(byPart)) {
    const offs = byPart[p]
    let expectNext = from[p] !== undefined ? BigInt(from[p]) : offs[0]
    for (let i = 0; i < offs.length; i++) {
      if (contiguous) {
        check(offs[i] === expectNext, `partition ${p}: record #${i} has offset ${offs[i]}, expected ${expectNext} (offsets must be contiguous)`)
      } else {
        check(i === 0 || offs[i] > offs[i - 1], `partition ${p}: offset ${offs[i]} after ${offs[i - 1]} (not increasing)`)
      }
      expectNext = offs[i] + 1n
    }
  }
  return byPart
}

// ---------------------------------------------------------------------------------------
// produce-consume

async function produceConsume() {
  const topic = `${OPTS.prefix}-pc`
  const admin = newAdmin()
  await bounded('admin connect', () => admin.connect())
  await createTopic(admin, topic, 3)
  const md = await bounded('fetchTopicMetadata', () => admin.fetchTopicMetadata({ topics: [topic] }))
  eq(md.topics[0].partitions.length, 3, 'partitions in metadata')

  const producer = newProducer()
  await bounded('producer connect', () => producer.connect())

  const partitioner = Partitioners.DefaultPartitioner()
  const partitionMetadata = [0, 1, 2].map(partitionId => ({ partitionId, leader: 0 }))
  const expected = new Map() // "partition:offset" -> message
  let seq = 0
  const perCodec = {}
  for (const [codec, compression] of [
    ['none', CompressionTypes.None],
    ['gzip', CompressionTypes.GZIP],
  ]) {
    for (let batch = 0; batch < 10; batch++) {
      const messages = []
      for (let i = 0; i < 100; i++, seq++) {
        const big = seq % 500 === 3
        messages.push({
          key: `key-${seq % 257}`,
          value: seq % 199 === 7 ? null : big ? `value-${seq}-${'v'.repeat(20000)}` : `value-${seq}-${'x'.repeat(seq % 50)}`,
          headers: {
            seq: String(seq),
            codec,
            bin: Buffer.from([0, 255, seq & 255, 10]),
            empty: '',
            multi: ['first', `second-${seq}`],
          },
        })
      }
      const sentFrom = Date.now()
      const res = await bounded(`send ${codec} batch ${batch}`, () =>
        producer.send({ topic, acks: -1, compression, messages })
      )
      const sentTo = Date.now()
      for (const m of messages) m.window = [sentFrom, sentTo]
      const groups = {}
      for (const m of messages) {
        const p = partitioner({ topic, partitionMetadata, message: m })
        ;(groups[p] = groups[p] || []).push(m)
      }
      eq(res.map(r => r.partition).sort(), Object.keys(groups).map(Number).sort(), `partitions in produce response (${codec} batch ${batch})`)
      for (const r of res) {
        check(r.topicName === topic, `produce response topic ${r.topicName}`)
        check(r.errorCode === 0, `produce response errorCode ${r.errorCode} on partition ${r.partition}`)
        const base = BigInt(r.baseOffset)
        groups[r.partition].forEach((m, j) => expected.set(`${r.partition}:${base + BigInt(j)}`, m))
      }
    }
    perCodec[codec] = seq - (perCodec.none || 0)
    log(`produced ${perCodec[codec]} records with compression ${codec}`)
  }
  check(expected.size === 2000, `produce responses covered ${expected.size} distinct offsets, expected 2000`)

  const ends = await topicEnds(admin, topic)
  const totalHigh = Object.values(ends).reduce((s, e) => s + Number(e.high), 0)
  eq(totalHigh, 2000, 'sum of high watermarks')

  const records = await readAll('pc-reader', topic, 2000, { quietMs: 1000 })
  eq(records.length, 2000, 'records consumed')
  const byPart = checkPartitionOffsets(records, { contiguous: true, from: { 0: 0, 1: 0, 2: 0 } })
  for (const p of Object.keys(byPart)) {
    eq(String(byPart[p].length), ends[p].high, `records consumed from partition ${p} vs its high watermark`)
  }
  let seenTombstones = 0
  for (const r of records) {
    const m = expected.get(`${r.partition}:${r.offset}`)
    check(m, `consumed partition ${r.partition} offset ${r.offset}, which no produce response covered`)
    const where = `record ${r.partition}:${r.offset} (seq ${m.headers.seq})`
    eq(str(r.key), m.key, `${where} key`)
    eq(str(r.value), m.value, `${where} value`)
    if (m.value === null) seenTombstones++
    eq(normHeaders(r.headers), normHeaders(m.headers), `${where} headers`)
    const ts = Number(r.timestamp)
    check(ts >= m.window[0] && ts <= m.window[1], `${where} timestamp ${r.timestamp} is outside the send window ${m.window} (CreateTime set by kafkajs)`)
  }
  // Per-key order: within a key (one partition) the seq numbers must increase.
  const lastSeq = {}
  for (const p of Object.keys(byPart)) {
    for (const r of records.filter(x => String(x.partition) === p)) {
      const k = str(r.key)
      const s = Number(str(r.headers.seq))
      check(lastSeq[k] === undefined || s > lastSeq[k], `key ${k}: seq ${s} after ${lastSeq[k]}`)
      lastSeq[k] = s
    }
  }

  // The same data through small fetches: a batch larger than maxBytesPerPartition (the
  // 20 kB records) must still be returned whole (KIP-74), so the consumer makes progress.
  const small = await readAll('pc-small-fetch', topic, 2000, {
    quietMs: 500,
    consumerConfig: { maxBytesPerPartition: 4096, maxBytes: 8192 },
  })
  eq(small.length, 2000, 'records consumed with maxBytesPerPartition 4096')
  checkPartitionOffsets(small, { contiguous: true, from: { 0: 0, 1: 0, 2: 0 } })
  for (const r of small) {
    const m = expected.get(`${r.partition}:${r.offset}`)
    eq(str(r.value), m.value, `small-fetch record ${r.partition}:${r.offset} value`)
  }

  // acks 0: no response is expected; the records still land, in order, and the
  // connection stays usable for the acks -1 send after them.
  const acks0 = `${OPTS.prefix}-pc-acks0`
  await createTopic(admin, acks0, 1)
  for (let b = 0; b < 4; b++) {
    const res = await bounded(`acks 0 send ${b}`, () =>
      producer.send({ topic: acks0, acks: 0, messages: [...Array(25).keys()].map(i => ({ value: `a0-${b * 25 + i}` })) })
    )
    check(Array.isArray(res), `acks 0 send returned ${JSON.stringify(res)}`)
  }
  const last = await bounded('acks -1 send after acks 0', () => producer.send({ topic: acks0, acks: -1, messages: [{ value: 'a0-100' }] }))
  eq([last.length, last[0].errorCode, last[0].baseOffset], [1, 0, '100'], 'acks -1 send after 100 acks 0 records [responses, errorCode, baseOffset]')
  const a0 = await readAll('pc-acks0-reader', acks0, 101, { quietMs: 500 })
  eq(a0.map(r => str(r.value)), [...Array(101).keys()].map(i => `a0-${i}`), 'acks 0 records read back')
  const unmatched = kafkaWarnings.filter(w => /Response without match/i.test(w))
  check(unmatched.length === 0, `the broker answered acks 0 produce requests: ${unmatched[0]}`)

  // message.timestamp.type=LogAppendTime: the broker stamps the batch; the produce
  // response carries that time and the consumer sees it instead of the client's.
  const lat = `${OPTS.prefix}-pc-logappend`
  await createTopic(admin, lat, 1, [{ name: 'message.timestamp.type', value: 'LogAppendTime' }])
  const oldTs = String(Date.now() - 3600000)
  const latFrom = Date.now()
  const latRes = await bounded('send to the LogAppendTime topic', () =>
    producer.send({ topic: lat, acks: -1, messages: [...Array(10).keys()].map(i => ({ value: `lat-${i}`, timestamp: oldTs })) })
  )
  const latTo = Date.now()
  const appendTime = Number(latRes[0].logAppendTime)
  check(appendTime >= latFrom - 1000 && appendTime <= latTo + 1000, `produce response logAppendTime ${latRes[0].logAppendTime} not within [${latFrom}, ${latTo}]`)
  const latRecords = await readAll('pc-logappend-reader', lat, 10, { quietMs: 300 })
  eq(latRecords.map(r => r.timestamp), Array(10).fill(latRes[0].logAppendTime), 'timestamps read from the LogAppendTime topic (the produce response logAppendTime)')

  return {
    topic,
    produced: 2000,
    consumed: records.length,
    per_partition: Object.fromEntries(Object.entries(byPart).map(([p, o]) => [p, o.length])),
    tombstones: seenTombstones,
    small_fetch: small.length,
    acks0: a0.length,
    log_append_time: latRes[0].logAppendTime,
  }
}

// ---------------------------------------------------------------------------------------
// groups

async function groups() {
  const topic = `${OPTS.prefix}-groups`
  const groupId = `${OPTS.prefix}-group`
  const admin = newAdmin()
  await bounded('admin connect', () => admin.connect())
  await createTopic(admin, topic, 4)
  const producer = newProducer()
  await bounded('producer connect', () => producer.connect())
  const ALL = [0, 1, 2, 3]
  const PER = 50
  let round = 0
  const produceRound = async () => {
    round++
    const messages = []
    for (const p of ALL) for (let i = 0; i < PER; i++) messages.push({ partition: p, key: `k${i}`, value: `r${round}-p${p}-${i}` })
    await bounded(`produce round ${round}`, () => producer.send({ topic, acks: -1, messages }))
    log(`produced round ${round}: ${PER} records to each of ${ALL.length} partitions`)
    return round
  }
  const valuesOf = (state, r) => new Set(state.records.map(x => str(x.value)).filter(v => v.startsWith(`r${r}-`)))
  const waitCommitted = async target => {
    let last = null
    await waitFor(
      `group ${groupId} committed offsets ${target} on every partition`,
      async () => {
        last = await groupOffsets(admin, groupId, topic)
        return ALL.every(p => last[p] === String(target))
      },
      () => JSON.stringify(last),
      250
    )
    log(`committed offsets are ${JSON.stringify(last)}`)
  }

  // 1. One member reads round 1 and commits.
  await produceRound()
  const memberConfig = { groupId }
  const a = await startRecordingConsumer('member-A', memberConfig, [topic])
  await waitFor('member-A to be assigned all 4 partitions', () => JSON.stringify(a.state.assignment) === JSON.stringify(ALL), () => JSON.stringify(a.state.assignment))
  await waitFor('member-A to read round 1', () => valuesOf(a.state, 1).size === ALL.length * PER, () => `${valuesOf(a.state, 1).size} distinct`)
  await waitCommitted(PER)

  // 2. A second member joins: the group rebalances, the partitions are split.
  const joinsBefore = a.state.joins
  const b = await startRecordingConsumer('member-B', memberConfig, [topic])
  await waitFor(
    'the rebalance after member-B joined',
    () =>
      b.state.assignment &&
      b.state.assignment.length > 0 &&
      a.state.joins > joinsBefore &&
      JSON.stringify([...a.state.assignment, ...b.state.assignment].sort()) === JSON.stringify(ALL),
    () => `A ${JSON.stringify(a.state.assignment)} (joins ${a.state.joins}), B ${JSON.stringify(b.state.assignment)}`
  )
  const aParts = a.state.assignment.slice()
  const bParts = b.state.assignment.slice()
  check(aParts.length > 0, `member-A has no partitions after the rebalance (B has ${JSON.stringify(bParts)})`)
  await produceRound()
  await waitFor(
    'round 2 to be read by the two members',
    () => new Set([...valuesOf(a.state, 2), ...valuesOf(b.state, 2)]).size === ALL.length * PER,
    () => `A ${valuesOf(a.state, 2).size}, B ${valuesOf(b.state, 2).size}`
  )
  for (const [st, parts] of [[a.state, aParts], [b.state, bParts]]) {
    for (const r of st.records.filter(x => str(x.value).startsWith('r2-'))) {
      check(parts.includes(r.partition), `${st.name} read partition ${r.partition} which it was not assigned (${JSON.stringify(parts)})`)
    }
  }
  for (const p of bParts) {
    eq(b.state.firstSinceJoin[p], String(PER), `member-B's first offset on partition ${p} (must resume at the committed offset)`)
  }
  await waitCommitted(2 * PER)

  // 3. member-B leaves; member-A takes over its partitions from B's committed offsets.
  const joinsBeforeLeave = a.state.joins
  await disconnect(b.consumer, 'member-B')
  log('member-B disconnected')
  await waitFor(
    'member-A to take over all partitions',
    () => a.state.joins > joinsBeforeLeave && JSON.stringify(a.state.assignment) === JSON.stringify(ALL),
    () => `A ${JSON.stringify(a.state.assignment)} (joins ${a.state.joins})`
  )
  await produceRound()
  await waitFor('member-A to read round 3', () => valuesOf(a.state, 3).size === ALL.length * PER, () => `${valuesOf(a.state, 3).size} distinct`)
  for (const p of bParts) {
    eq(a.state.firstSinceJoin[p], String(2 * PER), `member-A's first offset on taken-over partition ${p}`)
  }
  await waitCommitted(3 * PER)

  // 4. A member in another process joins, then dies without leaving (SIGKILL): the
  // coordinator expires its session (6 s) and member-A gets its partitions back.
  const joinsBeforeD = a.state.joins
  const d = spawnMember()
  await waitFor(
    'the rebalance after member-D (a child process) joined',
    () =>
      d.state.assignment &&
      d.state.assignment.length > 0 &&
      a.state.joins > joinsBeforeD &&
      JSON.stringify([...a.state.assignment, ...d.state.assignment].sort()) === JSON.stringify(ALL),
    () => `A ${JSON.stringify(a.state.assignment)} (joins ${a.state.joins}), D ${JSON.stringify(d.state.assignment)} (exited ${d.state.exited})`
  )
  const dParts = d.state.assignment.slice()
  const joinsBeforeKill = a.state.joins
  d.child.kill('SIGKILL')
  const killedAt = Date.now()
  log(`member-D (partitions ${JSON.stringify(dParts)}) killed with SIGKILL`)
  await waitFor(
    'member-A to take over the partitions of the dead member-D (session expiry)',
    () => a.state.joins > joinsBeforeKill && JSON.stringify(a.state.assignment) === JSON.stringify(ALL),
    () => `A ${JSON.stringify(a.state.assignment)} (joins ${a.state.joins})`
  )
  const expiryMs = Date.now() - killedAt
  log(`member-A has all partitions ${expiryMs} ms after the kill`)
  await produceRound()
  await waitFor('member-A to read round 4', () => valuesOf(a.state, 4).size === ALL.length * PER, () => `${valuesOf(a.state, 4).size} distinct`)
  for (const p of dParts) {
    eq(a.state.firstSinceJoin[p], String(3 * PER), `member-A's first offset on partition ${p} after member-D died`)
  }
  const END = 4 * PER

  const all = [...a.state.records, ...b.state.records]
  const distinct = new Set(all.map(r => `${r.partition}:${r.offset}`))
  eq(distinct.size, 4 * ALL.length * PER, 'distinct records read by the group')
  eq(all.length, distinct.size, 'records read by the group (duplicates mean lost commits)')

  // 4. Committed offsets equal the end offsets.
  let ends = null
  let committed = null
  await waitFor(
    'fetchOffsets to equal fetchTopicOffsets',
    async () => {
      ends = committedAtEnd(await topicEnds(admin, topic))
      committed = await groupOffsets(admin, groupId, topic)
      return JSON.stringify(committed) === JSON.stringify(ends)
    },
    () => `committed ${JSON.stringify(committed)} ends ${JSON.stringify(ends)}`,
    250
  )
  log(`fetchOffsets = fetchTopicOffsets = ${JSON.stringify(ends)}`)

  // 5. describeGroups / listGroups on the live group.
  const desc = await bounded('describeGroups', () => admin.describeGroups([groupId]))
  eq(desc.groups.length, 1, 'describeGroups groups')
  const g = desc.groups[0]
  eq([g.groupId, g.errorCode, g.state, g.protocolType, g.protocol], [groupId, 0, 'Stable', 'consumer', 'RoundRobinAssigner'], 'describeGroups [groupId, errorCode, state, protocolType, protocol]')
  eq(g.members.length, 1, 'describeGroups members')
  eq(g.members[0].memberId, a.state.memberId, 'describeGroups memberId')
  const assignment = AssignerProtocol.MemberAssignment.decode(g.members[0].memberAssignment)
  eq((assignment.assignment[topic] || []).slice().sort(), ALL, 'describeGroups member assignment')
  const meta = AssignerProtocol.MemberMetadata.decode(g.members[0].memberMetadata)
  eq(meta.topics, [topic], 'describeGroups member metadata topics')
  const listed = await bounded('listGroups', () => admin.listGroups())
  const mine = listed.groups.find(x => x.groupId === groupId)
  check(mine, `listGroups does not list ${groupId}: ${JSON.stringify(listed.groups)}`)
  eq(mine.protocolType, 'consumer', 'listGroups protocolType')

  // 6. deleteGroups is refused while the group has a member, accepted once it is empty.
  let refused = null
  try {
    await bounded('deleteGroups (non-empty group)', () => admin.deleteGroups([groupId]))
  } catch (e) {
    refused = e
  }
  check(refused, 'deleteGroups on a group with a live member succeeded (Kafka answers NON_EMPTY_GROUP)')
  const refusedType = refused.groups && refused.groups[0] && refused.groups[0].error && refused.groups[0].error.type
  eq(refusedType, 'NON_EMPTY_GROUP', `deleteGroups error on a non-empty group (${describeError(refused)})`)

  await disconnect(a.consumer, 'member-A')
  log('member-A disconnected')
  let state = null
  await waitFor(
    'the group to be Empty',
    async () => {
      const d = await admin.describeGroups([groupId])
      state = d.groups[0]
      return state.state === 'Empty'
    },
    () => JSON.stringify(state && { state: state.state, members: state.members.length }),
    250
  )
  eq(state.members.length, 0, 'members of the Empty group')

  // 7. setOffsets on the empty group; a new member resumes there. resetOffsets to earliest.
  await bounded('setOffsets', () =>
    admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '10' }, { partition: 1, offset: '20' }] })
  )
  eq(await groupOffsets(admin, groupId, topic), { 0: '10', 1: '20', 2: String(END), 3: String(END) }, 'fetchOffsets after setOffsets')
  const c = await startRecordingConsumer('member-C', memberConfig, [topic])
  const cExpected = END - 10 + (END - 20)
  await waitFor('member-C to read from the set offsets to the end', () => c.state.records.length >= cExpected, () => `${c.state.records.length} records`)
  await sleep(500)
  eq(c.state.records.length, cExpected, 'records read by member-C after setOffsets')
  eq(c.state.firstSinceJoin, { 0: '10', 1: '20' }, "member-C's first offsets")
  log('member-C resumed at the offsets set and read to the end')
  await waitFor('member-C to commit the end offsets', async () => JSON.stringify(await groupOffsets(admin, groupId, topic)) === JSON.stringify(ends), null, 250)
  await disconnect(c.consumer, 'member-C')
  log('member-C disconnected')
  let stateC = null
  await waitFor(
    'the group to be Empty again',
    async () => {
      stateC = (await admin.describeGroups([groupId])).groups[0]
      return stateC.state === 'Empty'
    },
    () => JSON.stringify(stateC && { state: stateC.state, members: stateC.members.map(m => m.memberId) }),
    250
  )
  log('the group is Empty again')
  await bounded('resetOffsets earliest', () => admin.resetOffsets({ groupId, topic, earliest: true }))
  const resolved = await bounded('fetchOffsets resolveOffsets', () => admin.fetchOffsets({ groupId, topics: [topic], resolveOffsets: true }))
  eq(resolved[0].partitions.map(p => [p.partition, p.offset]).sort(), ALL.map(p => [p, '0']), 'fetchOffsets(resolveOffsets) after resetOffsets(earliest)')
  eq(await groupOffsets(admin, groupId, topic), { 0: '0', 1: '0', 2: '0', 3: '0' }, 'fetchOffsets after resolving the reset')
  log('setOffsets / resetOffsets work on the empty group')
  const deleted = await bounded('deleteGroups', () => admin.deleteGroups([groupId]))
  eq(deleted.map(d => [d.groupId, d.errorCode]), [[groupId, 0]], 'deleteGroups result')
  const listedAfter = await bounded('listGroups', () => admin.listGroups())
  check(!listedAfter.groups.some(x => x.groupId === groupId), `listGroups still lists ${groupId} after deleteGroups`)
  const descAfter = await bounded('describeGroups', () => admin.describeGroups([groupId]))
  eq(descAfter.groups[0].state, 'Dead', 'describeGroups state after deleteGroups')
  const offsetsAfter = await groupOffsets(admin, groupId, topic)
  eq(offsetsAfter, Object.fromEntries(ALL.map(p => [p, '-1'])), 'fetchOffsets after deleteGroups')

  return {
    topic,
    group: groupId,
    split: { A: aParts, B: bParts },
    crashed_member: { partitions: dParts, takeover_ms: expiryMs },
    read: { A: a.state.records.length, B: b.state.records.length },
    committed,
  }
}

// The `__member` child of `groups`: joins the group and prints its assignment as a JSON
// line on stdout at each join, until it is killed, its stdin closes or the deadline passes.
async function memberProcess() {
  const topic = `${OPTS.prefix}-groups`
  const groupId = `${OPTS.prefix}-group`
  process.stdin.on('end', () => process.exit(0))
  process.stdin.resume()
  const { state } = await startRecordingConsumer('member-D', { groupId, sessionTimeout: 6000, heartbeatInterval: 1000 }, [topic])
  let reported = -1
  await waitFor('the end of member-D (it is killed)', () => {
    if (state.joins !== reported) {
      reported = state.joins
      if (state.assignment) process.stdout.write(`${JSON.stringify({ joins: state.joins, assignment: state.assignment })}\n`)
    }
    return false
  }).catch(() => {})
  return { note: 'member-D reached its deadline without being killed' }
}

// Starts the `__member` child; returns { child, state } where state.assignment follows
// the child's reports.
function spawnMember() {
  const { spawn } = require('child_process')
  const readline = require('readline')
  const child = spawn(
    process.execPath,
    [__filename, '__member', '--bootstrap', OPTS.bootstrap, '--topic-prefix', OPTS.prefix, '--timeout', String(Math.max(1, Math.ceil(remainingMs() / 1000)))],
    { stdio: ['pipe', 'pipe', 'inherit'] }
  )
  children.push(child)
  const state = { assignment: null, joins: 0, exited: null }
  child.on('exit', (code, signal) => {
    state.exited = signal || code
  })
  readline.createInterface({ input: child.stdout }).on('line', line => {
    try {
      const m = JSON.parse(line)
      if (Array.isArray(m.assignment)) Object.assign(state, m)
    } catch (e) {
      // the child's final result line
    }
  })
  return { child, state }
}

// ---------------------------------------------------------------------------------------
// idempotence

async function idempotence() {
  const topic = `${OPTS.prefix}-idem`
  const admin = newAdmin()
  await bounded('admin connect', () => admin.connect())
  await createTopic(admin, topic, 3)
  const producer = newProducer({ idempotent: true, maxInFlightRequests: 1 }, 'idempotent-producer')
  await bounded('producer connect', () => producer.connect())
  const N = 1000
  for (let start = 0; start < N; start += 50) {
    const messages = []
    for (let i = start; i < start + 50; i++) messages.push({ key: `k-${i % 37}`, value: `idem-${i}` })
    const res = await bounded(`send ${start}`, () => producer.send({ topic, acks: -1, messages }))
    for (const r of res) check(r.errorCode === 0, `produce errorCode ${r.errorCode} on partition ${r.partition}`)
  }
  log(`produced ${N} records with an idempotent producer`)
  const ends = await topicEnds(admin, topic)
  eq(Object.values(ends).reduce((s, e) => s + Number(e.high), 0), N, 'sum of high watermarks')
  const records = await readAll('idem-reader', topic, N, { quietMs: 1500 })
  const counts = new Map()
  for (const r of records) counts.set(str(r.value), (counts.get(str(r.value)) || 0) + 1)
  const dups = [...counts].filter(([, c]) => c > 1).map(([v]) => v)
  check(dups.length === 0, `records read more than once: ${dups.slice(0, 10).join(', ')}`)
  for (let i = 0; i < N; i++) check(counts.get(`idem-${i}`) === 1, `idem-${i} read ${counts.get(`idem-${i}`) || 0} times`)
  eq(records.length, N, 'records read')
  checkPartitionOffsets(records, { contiguous: true, from: { 0: 0, 1: 0, 2: 0 } })
  return { topic, produced: N, consumed: records.length, ends: highs(ends) }
}

// ---------------------------------------------------------------------------------------
// transactions

async function transactions() {
  const topic = `${OPTS.prefix}-txn`
  const admin = newAdmin()
  await bounded('admin connect', () => admin.connect())
  await createTopic(admin, topic, 3)

  // 1. commit, abort, commit.
  const producer = newProducer(
    { transactionalId: `${OPTS.prefix}-txid`, idempotent: true, maxInFlightRequests: 1 },
    'transactional-producer'
  )
  await bounded('transactional producer connect', () => producer.connect())
  const runTxn = async (label, finish) => {
    const txn = await bounded(`begin ${label}`, () => producer.transaction())
    const messages = []
    for (let i = 0; i < 100; i++) messages.push({ key: `k-${i % 11}`, value: `${label}-${i}` })
    await bounded(`send in ${label}`, () => txn.send({ topic, acks: -1, messages }))
    await bounded(`${finish} ${label}`, () => txn[finish]())
    log(`transaction ${label}: 100 records, ${finish}`)
  }
  await runTxn('c1', 'commit')
  await runTxn('a2', 'abort')
  await runTxn('c3', 'commit')

  // An open transaction holds the last stable offset; a new producer with the same
  // transactionalId fences the old one and aborts its open transaction.
  const fenceId = `${OPTS.prefix}-fence-txid`
  const zombie = newProducer({ transactionalId: fenceId, idempotent: true, maxInFlightRequests: 1 }, 'zombie-producer')
  await bounded('zombie producer connect', () => zombie.connect())
  const before = await topicEnds(admin, topic)
  const zt = await bounded('zombie begin', () => zombie.transaction())
  await bounded('zombie send', () =>
    zt.send({ topic, acks: -1, messages: [...Array(10).keys()].map(i => ({ partition: 0, value: `z-${i}` })) })
  )
  const open = await topicEnds(admin, topic)
  eq(open[0].high, before[0].high, 'partition 0 read_committed end offset (last stable offset) while a transaction is open')
  const successor = newProducer({ transactionalId: fenceId, idempotent: true, maxInFlightRequests: 1 }, 'successor-producer')
  await bounded('successor producer connect (fences the zombie)', () => successor.connect())
  const st = await bounded('successor begin', () => successor.transaction())
  await bounded('successor send', () =>
    st.send({ topic, acks: -1, messages: [...Array(10).keys()].map(i => ({ partition: 0, value: `f-${i}` })) })
  )
  await bounded('successor commit', () => st.commit())
  log('successor committed 10 records')
  const fencedErr = await expectError('zombie commit after being fenced', () => zt.commit(), 'INVALID_PRODUCER_EPOCH')
  const after = await topicEnds(admin, topic)
  eq(after[0].high, String(Number(before[0].high) + 22), 'partition 0 end offset after the aborted zombie (10 + marker) and the successor (10 + marker)')

  const committed = await readAll('txn-read-committed', topic, 210, { quietMs: 3000 })
  const vals = committed.map(r => str(r.value))
  const aborted = vals.filter(v => v.startsWith('a2-') || v.startsWith('z-'))
  check(aborted.length === 0, `read_committed consumer saw ${aborted.length} aborted records (e.g. ${aborted[0]})`)
  eq(vals.length, 210, 'records seen by the read_committed consumer (c1, c3 and the successor)')
  for (const [label, n] of [['c1', 100], ['c3', 100], ['f', 10]]) {
    for (let i = 0; i < n; i++) check(vals.includes(`${label}-${i}`), `read_committed consumer missed ${label}-${i}`)
  }
  checkPartitionOffsets(committed, { contiguous: false })
  const uncommitted = await readAll('txn-read-uncommitted', topic, 320, { readUncommitted: true, quietMs: 2000 })
  eq(uncommitted.length, 320, 'records seen by the read_uncommitted consumer (aborted included)')

  // 2. consume-transform-produce with sendOffsets.
  const input = `${OPTS.prefix}-ctp-in`
  const output = `${OPTS.prefix}-ctp-out`
  const ctpGroup = `${OPTS.prefix}-ctp-group`
  await createTopic(admin, input, 3)
  await createTopic(admin, output, 3)
  const plain = newProducer({}, 'input-producer')
  await bounded('input producer connect', () => plain.connect())
  const IN = 60
  const inMessages = []
  for (let i = 0; i < IN; i++) inMessages.push({ key: `k-${i}`, value: `in-${i}` })
  await bounded('produce input', () => plain.send({ topic: input, acks: -1, messages: inMessages }))
  const inEnds = committedAtEnd(await topicEnds(admin, input))
  log(`produced ${IN} input records; a group at the end commits ${JSON.stringify(inEnds)}`)

  const ctpProducer = newProducer(
    { transactionalId: `${OPTS.prefix}-ctp-txid`, idempotent: true, maxInFlightRequests: 1 },
    'ctp-producer'
  )
  await bounded('ctp producer connect', () => ctpProducer.connect())
  const ctp = newConsumer({ groupId: ctpGroup }, 'ctp-consumer')
  let transformed = 0
  let txns = 0
  await bounded('ctp consumer connect', () => ctp.connect())
  await bounded('ctp subscribe', () => ctp.subscribe({ topics: [input], fromBeginning: true }))
  await bounded('ctp run', () =>
    ctp.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
        if (batch.messages.length === 0) return
        const txn = await ctpProducer.transaction()
        try {
          await txn.send({
            topic: output,
            acks: -1,
            messages: batch.messages.map(m => ({ key: m.key, value: `out-${str(m.value)}` })),
          })
          const next = String(BigInt(batch.messages[batch.messages.length - 1].offset) + 1n)
          await txn.sendOffsets({
            consumerGroupId: ctpGroup,
            topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }],
          })
          await txn.commit()
        } catch (e) {
          log(`ctp transaction failed: ${describeError(e)}`)
          await txn.abort().catch(() => {})
          throw e
        }
        txns++
        transformed += batch.messages.length
        for (const m of batch.messages) resolveOffset(m.offset)
        await heartbeat()
      },
    })
  )
  await waitFor(`the ctp consumer to transform ${IN} records`, () => transformed >= IN, () => `${transformed} in ${txns} transactions`)
  await disconnect(ctp, 'ctp-consumer')
  log(`transformed ${transformed} records in ${txns} transactions`)
  let ctpOffsets = null
  await waitFor(
    'fetchOffsets of the ctp group to equal the input end offsets',
    async () => {
      ctpOffsets = await groupOffsets(admin, ctpGroup, input)
      return JSON.stringify(ctpOffsets) === JSON.stringify(inEnds)
    },
    () => `committed ${JSON.stringify(ctpOffsets)} ends ${JSON.stringify(inEnds)}`,
    250
  )
  eq(transformed, IN, 'records transformed (a redelivery means sendOffsets did not commit)')
  const out = await readAll('ctp-output-reader', output, IN, { quietMs: 1500 })
  eq(out.map(r => str(r.value)).sort(), inMessages.map(m => `out-${m.value}`).sort(), 'output records (read_committed)')

  // 3. Offsets sent in a transaction stay pending until commit, and vanish on abort.
  const txn = await bounded('begin offsets-only transaction', () => ctpProducer.transaction())
  await bounded('sendOffsets (to be aborted)', () =>
    txn.sendOffsets({ consumerGroupId: ctpGroup, topics: [{ topic: input, partitions: [{ partition: 0, offset: '1' }] }] })
  )
  eq(await groupOffsets(admin, ctpGroup, input), inEnds, 'fetchOffsets while a transaction holds pending offsets')
  await bounded('abort offsets-only transaction', () => txn.abort())
  await sleep(500)
  eq(await groupOffsets(admin, ctpGroup, input), inEnds, 'fetchOffsets after the transaction with offsets aborted')
  log('aborted sendOffsets left the committed offsets unchanged')

  return {
    topic,
    read_committed: committed.length,
    fenced_error: errorTypes(fencedErr),
    read_uncommitted: uncommitted.length,
    ctp: { group: ctpGroup, transactions: txns, transformed, committed: ctpOffsets, output: out.length },
  }
}

// ---------------------------------------------------------------------------------------
// admin

async function adminScenario() {
  const t1 = `${OPTS.prefix}-adm-a`
  const t2 = `${OPTS.prefix}-adm-b`
  const admin = newAdmin()
  await bounded('admin connect', () => admin.connect())

  // describeCluster
  const cluster = await bounded('describeCluster', () => admin.describeCluster())
  const [bhost, bport] = OPTS.bootstrap.split(':')
  eq(cluster.brokers.length, 1, 'describeCluster brokers')
  eq([cluster.brokers[0].host, cluster.brokers[0].port], [bhost, Number(bport)], 'describeCluster broker host/port')
  check(typeof cluster.clusterId === 'string' && cluster.clusterId.length > 0, `describeCluster clusterId ${cluster.clusterId}`)
  check(cluster.brokers.some(b => b.nodeId === cluster.controller), `describeCluster controller ${cluster.controller} is not a listed broker`)
  log(`cluster ${cluster.clusterId}, broker ${JSON.stringify(cluster.brokers[0])}, controller ${cluster.controller}`)

  // createTopics (with configs), again (exists), listTopics, fetchTopicMetadata
  await createTopic(admin, t1, 2)
  await createTopic(admin, t2, 1, [
    { name: 'retention.ms', value: '3600000' },
    { name: 'max.message.bytes', value: '2000000' },
  ])
  const again = await bounded('createTopics (existing)', () =>
    admin.createTopics({ topics: [{ topic: t1, numPartitions: 2, replicationFactor: 1 }], waitForLeaders: true })
  )
  eq(again, false, 'createTopics of an existing topic (kafkajs returns false on TOPIC_ALREADY_EXISTS)')
  await expectError('createTopics with replicationFactor 3 on one broker', () =>
    admin.createTopics({ topics: [{ topic: `${OPTS.prefix}-adm-rf3`, numPartitions: 1, replicationFactor: 3 }], waitForLeaders: false }),
    'INVALID_REPLICATION_FACTOR')
  const t3 = `${OPTS.prefix}-adm-validate`
  const vo = await bounded('createTopics validateOnly', () =>
    admin.createTopics({ topics: [{ topic: t3, numPartitions: 2, replicationFactor: 1 }], validateOnly: true, waitForLeaders: false })
  )
  eq(vo, true, 'createTopics validateOnly result')
  const topics = await bounded('listTopics', () => admin.listTopics())
  check(!topics.includes(t3), `createTopics with validateOnly created ${t3}`)
  check(topics.includes(t1) && topics.includes(t2), `listTopics lacks the new topics: ${JSON.stringify(topics)}`)
  const nodeId = cluster.brokers[0].nodeId
  const checkMetadata = async (topic, n) => {
    const md = await bounded(`fetchTopicMetadata ${topic}`, () => admin.fetchTopicMetadata({ topics: [topic] }))
    eq(md.topics.map(t => t.name), [topic], 'fetchTopicMetadata topics')
    const parts = md.topics[0].partitions.slice().sort((x, y) => x.partitionId - y.partitionId)
    eq(parts.map(p => p.partitionId), [...Array(n).keys()], `partitions of ${topic}`)
    for (const p of parts) {
      eq([p.partitionErrorCode, p.leader, p.replicas, p.isr], [0, nodeId, [nodeId], [nodeId]], `${topic}/${p.partitionId} [error, leader, replicas, isr]`)
    }
  }
  await checkMetadata(t1, 2)
  await checkMetadata(t2, 1)
  const mdAll = await bounded('fetchTopicMetadata (all)', () => admin.fetchTopicMetadata())
  check(mdAll.topics.some(t => t.name === t1), 'fetchTopicMetadata() without topics does not list the new topic')

  // createPartitions
  await bounded('createPartitions', () => admin.createPartitions({ topicPartitions: [{ topic: t1, count: 5 }] }))
  await checkMetadata(t1, 5)
  log('createPartitions grew the topic to 5 partitions')
  await expectError('createPartitions to fewer partitions', () =>
    admin.createPartitions({ topicPartitions: [{ topic: t1, count: 3 }] }), 'INVALID_PARTITIONS')

  // describeConfigs / alterConfigs
  const describe = async (name, configNames) => {
    const res = await bounded(`describeConfigs ${name}`, () =>
      admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name, configNames }], includeSynonyms: false })
    )
    eq(res.resources.length, 1, 'describeConfigs resources')
    const r = res.resources[0]
    eq([r.errorCode, r.resourceName, r.resourceType], [0, name, ConfigResourceTypes.TOPIC], 'describeConfigs [errorCode, resourceName, resourceType]')
    return Object.fromEntries(r.configEntries.map(e => [e.configName, e]))
  }
  let cfg = await describe(t2, ['retention.ms', 'max.message.bytes'])
  eq(Object.keys(cfg).sort(), ['max.message.bytes', 'retention.ms'], 'describeConfigs with configNames returns exactly those')
  eq([cfg['retention.ms'].configValue, cfg['retention.ms'].isDefault, cfg['retention.ms'].configSource], ['3600000', false, 1], 'retention.ms [value, isDefault, configSource] as created')
  eq(cfg['max.message.bytes'].configValue, '2000000', 'max.message.bytes as created')
  const producer = newProducer()
  await bounded('producer connect', () => producer.connect())
  const bigValue = 'm'.repeat(1500000)
  await bounded('produce a 1.5 MB record under max.message.bytes=2000000', () =>
    producer.send({ topic: t2, acks: -1, messages: [{ value: bigValue }] })
  )
  const allCfg = await describe(t2)
  for (const name of ['retention.ms', 'cleanup.policy', 'segment.bytes', 'max.message.bytes', 'min.insync.replicas']) {
    check(allCfg[name], `describeConfigs without configNames lacks ${name}`)
  }
  eq(allCfg['cleanup.policy'].configValue, 'delete', 'cleanup.policy default')
  check(allCfg['cleanup.policy'].isDefault === true, `cleanup.policy isDefault ${allCfg['cleanup.policy'].isDefault}`)
  const altered = await bounded('alterConfigs', () =>
    admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: t2, configEntries: [{ name: 'retention.ms', value: '7200000' }] }],
    })
  )
  eq(altered.resources.map(r => [r.errorCode, r.resourceName]), [[0, t2]], 'alterConfigs result')
  await waitFor(
    'describeConfigs to show retention.ms=7200000',
    async () => (await describe(t2, ['retention.ms']))['retention.ms'].configValue === '7200000',
    null,
    250
  )
  cfg = await describe(t2, ['retention.ms', 'max.message.bytes'])
  eq(cfg['retention.ms'].configSource, 1, 'retention.ms configSource after alterConfigs')
  // AlterConfigs (not incremental) replaces the topic's whole config set.
  check(cfg['max.message.bytes'].configValue !== '2000000' && cfg['max.message.bytes'].isDefault === true,
    `max.message.bytes after alterConfigs without it: ${JSON.stringify(cfg['max.message.bytes'])} (AlterConfigs must reset configs it does not name)`)
  log('alterConfigs set retention.ms and reset max.message.bytes')
  await expectError('produce a 1.5 MB record after max.message.bytes went back to the default', () =>
    producer.send({ topic: t2, acks: -1, messages: [{ value: bigValue }] }), 'MESSAGE_TOO_LARGE')
  const syn = await bounded('describeConfigs includeSynonyms', () =>
    admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: t2, configNames: ['retention.ms'] }], includeSynonyms: true })
  )
  const synonyms = syn.resources[0].configEntries[0].configSynonyms || []
  check(synonyms.length >= 1, `retention.ms has no synonyms with includeSynonyms: true`)
  eq([synonyms[0].configName, synonyms[0].configValue, synonyms[0].configSource], ['retention.ms', '7200000', 1], 'first synonym of retention.ms')
  // Synonyms below the topic level are broker configs: log.retention.{ms,minutes,hours}.
  const synDefault = await bounded('describeConfigs includeSynonyms (default retention.ms)', () =>
    admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: t1, configNames: ['retention.ms'] }], includeSynonyms: true })
  )
  const brokerSynonyms = [...synonyms, ...(synDefault.resources[0].configEntries[0].configSynonyms || [])].filter(x => x.configSource !== 1)
  for (const x of brokerSynonyms) {
    check(/^log\.retention\.(ms|minutes|hours)$/.test(x.configName),
      `retention.ms has a broker-level synonym named ${JSON.stringify(x.configName)} (source ${x.configSource}); Kafka names them log.retention.ms/minutes/hours`)
  }
  await expectError('alterConfigs with an invalid retention.ms', () =>
    admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: t2, configEntries: [{ name: 'retention.ms', value: 'soon' }] }] }),
    'INVALID_CONFIG')
  eq((await describe(t2, ['retention.ms']))['retention.ms'].configValue, '7200000', 'retention.ms after a rejected alterConfigs')
  await expectError('describeConfigs of a missing topic', () =>
    admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: `${OPTS.prefix}-adm-missing` }], includeSynonyms: false }),
    'UNKNOWN_TOPIC_OR_PARTITION')
  const brokerCfg = await bounded('describeConfigs broker', () =>
    admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.BROKER, name: String(nodeId), configNames: ['num.partitions', 'message.max.bytes', 'log.segment.bytes'] }], includeSynonyms: false })
  )
  const bc = Object.fromEntries(brokerCfg.resources[0].configEntries.map(e => [e.configName, e.configValue]))
  eq(Object.keys(bc).sort(), ['log.segment.bytes', 'message.max.bytes', 'num.partitions'], 'broker configs returned')
  for (const [k, v] of Object.entries(bc)) check(/^[0-9]+$/.test(v || ''), `broker config ${k} = ${v}`)
  log(`broker configs ${JSON.stringify(bc)}`)

  // fetchTopicOffsets / fetchTopicOffsetsByTimestamp
  const ts0 = Date.now() - 600000
  const messages = []
  for (let i = 0; i < 10; i++) messages.push({ partition: 0, key: `k${i}`, value: `v${i}`, timestamp: String(ts0 + i * 1000) })
  await bounded('produce timestamped records', () => producer.send({ topic: t1, acks: -1, messages }))
  await bounded('produce to partition 1', () =>
    producer.send({ topic: t1, acks: -1, messages: [1, 2, 3].map(i => ({ partition: 1, value: `p1-${i}` })) })
  )
  let ends = await topicEnds(admin, t1)
  eq(ends, { 0: { low: '0', high: '10' }, 1: { low: '0', high: '3' }, 2: { low: '0', high: '0' }, 3: { low: '0', high: '0' }, 4: { low: '0', high: '0' } }, 'fetchTopicOffsets')
  const byTs = async ts => {
    const res = await bounded(`fetchTopicOffsetsByTimestamp ${ts}`, () => admin.fetchTopicOffsetsByTimestamp(t1, ts))
    return Object.fromEntries(res.map(r => [r.partition, r.offset]))
  }
  // Partitions with no record at or after the timestamp get the high watermark (kafkajs
  // maps Kafka's -1 to it).
  eq((await byTs(ts0 + 5000))[0], '5', 'fetchTopicOffsetsByTimestamp(exact timestamp of offset 5)[0]')
  eq((await byTs(ts0 + 4500))[0], '5', 'fetchTopicOffsetsByTimestamp(between 4 and 5)[0]')
  eq(await byTs(ts0 - 1000), { 0: '0', 1: '0', 2: '0', 3: '0', 4: '0' }, 'fetchTopicOffsetsByTimestamp(before everything)')
  eq(await byTs(Date.now() + 3600000), { 0: '10', 1: '3', 2: '0', 3: '0', 4: '0' }, 'fetchTopicOffsetsByTimestamp(future)')
  const consumed = await readAll('adm-reader', t1, 13, { quietMs: 500 })
  const p0 = consumed.filter(r => r.partition === 0).sort((x, y) => Number(x.offset) - Number(y.offset))
  eq(p0.map(r => r.timestamp), messages.map(m => m.timestamp), 'timestamps read back from partition 0')

  // deleteTopicRecords
  await bounded('deleteTopicRecords to 4', () => admin.deleteTopicRecords({ topic: t1, partitions: [{ partition: 0, offset: '4' }] }))
  ends = await topicEnds(admin, t1)
  eq(ends[0], { low: '4', high: '10' }, 'partition 0 offsets after deleteTopicRecords(4)')
  eq(await byTs(ts0 - 1000), { 0: '4', 1: '0', 2: '0', 3: '0', 4: '0' }, 'fetchTopicOffsetsByTimestamp after deleteTopicRecords')
  await bounded('deleteTopicRecords to -1', () => admin.deleteTopicRecords({ topic: t1, partitions: [{ partition: 1, offset: '-1' }] }))
  ends = await topicEnds(admin, t1)
  eq(ends[1], { low: '3', high: '3' }, 'partition 1 offsets after deleteTopicRecords(-1 = high watermark)')
  log('deleteTopicRecords moved the log start offsets')
  const afterDelete = await readAll('adm-reader-after-delete', t1, 6, { quietMs: 500 })
  eq(afterDelete.map(r => [r.partition, r.offset]), [4, 5, 6, 7, 8, 9].map(o => [0, String(o)]), 'a new group (fromBeginning) after deleteTopicRecords')

  // deleteTopics
  await bounded('deleteTopics', () => admin.deleteTopics({ topics: [t1, t2], timeout: 20000 }))
  let left = null
  await waitFor(
    'listTopics to drop the deleted topics',
    async () => {
      const now = await admin.listTopics()
      left = now.filter(t => t === t1 || t === t2)
      return left.length === 0
    },
    () => JSON.stringify(left),
    250
  )
  log('deleteTopics removed both topics')

  // The name can be used again at once: a new, empty topic.
  await createTopic(admin, t1, 1)
  await checkMetadata(t1, 1)
  eq(await topicEnds(admin, t1), { 0: { low: '0', high: '0' } }, 'fetchTopicOffsets of the re-created topic')
  const again1 = await bounded('produce to the re-created topic', () => producer.send({ topic: t1, acks: -1, messages: [{ value: 'reborn' }] }))
  eq([again1[0].partition, again1[0].errorCode, again1[0].baseOffset], [0, 0, '0'], 'produce to the re-created topic [partition, errorCode, baseOffset]')
  const reborn = await readAll('adm-reader-recreated', t1, 1, { quietMs: 500 })
  eq(reborn.map(r => [r.partition, r.offset, str(r.value)]), [[0, '0', 'reborn']], 'records of the re-created topic')
  await bounded('deleteTopics (re-created)', () => admin.deleteTopics({ topics: [t1], timeout: 20000 }))
  log('a deleted topic name can be created again, empty')

  return { topics: [t1, t2], cluster: cluster.clusterId, broker: cluster.brokers[0] }
}

// ---------------------------------------------------------------------------------------
// Main

async function main() {
  const scenario = OPTS.scenario
  // Last resort: the process exits even if a disconnect hangs.
  const watchdog = setTimeout(() => {
    process.stdout.write(`${JSON.stringify({ scenario, ok: false, error: 'watchdog: the scenario did not finish (hung disconnect?)' })}\n`)
    process.exit(1)
  }, OPTS.timeoutS * 1000 + 45000)
  watchdog.unref()
  process.on('unhandledRejection', e => log(`unhandled rejection: ${describeError(e)}`))

  log(`bootstrap ${OPTS.bootstrap}, prefix ${OPTS.prefix}, timeout ${OPTS.timeoutS}s`)
  let result
  try {
    const details = await SCENARIOS[scenario]()
    result = { scenario, ok: true, elapsed_ms: Date.now() - STARTED, ...details }
  } catch (e) {
    log(`FAILED: ${describeError(e)}`)
    if (!(e instanceof CheckError) && e && e.stack) process.stderr.write(`${e.stack}\n`)
    result = { scenario, ok: false, elapsed_ms: Date.now() - STARTED, error: describeError(e) }
    if (kafkaWarnings.length) result.kafkajs_log = kafkaWarnings.slice(-5)
  }
  await disconnectAll()
  log(result.ok ? 'OK' : 'FAILED')
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(result.ok ? 0 : 1))
}

main()
