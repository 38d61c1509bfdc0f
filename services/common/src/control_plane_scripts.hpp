// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The Lua scripts of the control plane (docs/redis-schema.md). Fenced scripts take
// ARGV = ns, stream, id, epoch, campaign, expid, camera, then their own arguments, and return
// 1 (applied), -1 (stale epoch) or 0 (the job is no longer pending).

namespace ex2d::service::lua {

inline constexpr const char* kPrelude = R"LUA(
local ns = ARGV[1]
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function pending(stream, id)
  local p = redis.call('XPENDING', stream, 'readers', id, id, 1)
  if #p == 0 then return nil, nil end
  return tonumber(p[1][4]), p[1][2]
end
local function set_state(fkey, ekey, new, ts)
  local old = redis.call('HGET', fkey, 'state')
  if old ~= new then
    if old then redis.call('HINCRBY', ekey, 'n_' .. old, -1) end
    redis.call('HINCRBY', ekey, 'n_' .. new, 1)
  end
  redis.call('HSET', fkey, 'state', new, new .. '_at', ts, 'updated_at', ts)
end
local function event(kind, fkey, ts)
  local f = redis.call('HMGET', fkey, 'job', 'campaign', 'night', 'expid', 'camera', 'output',
                       'checksum', 'error')
  redis.call('XADD', ns .. ':events', 'MAXLEN', '~', '100000', '*', 'type', kind,
             'job', f[1] or '', 'campaign', f[2] or '', 'night', f[3] or '', 'expid', f[4] or '',
             'camera', f[5] or '', 'output', f[6] or '', 'checksum', f[7] or '',
             'error', f[8] or '', 'ts', ts)
end
local function exposure_check(ekey, ts)
  local h = redis.call('HMGET', ekey, 'nframes', 'n_done', 'n_failed', 'n_dead', 'state',
                       'campaign', 'night', 'expid')
  local n = tonumber(h[1] or '0')
  local done = tonumber(h[2] or '0')
  local cancelled = tonumber(redis.call('HGET', ekey, 'n_cancelled') or '0')
  local bad = tonumber(h[3] or '0') + tonumber(h[4] or '0')
  if n > 0 and done + bad + cancelled >= n and h[5] == 'active' then
    local st = 'done'
    if bad > 0 then st = 'done_with_errors' end
    if cancelled > 0 then st = 'cancelled' end
    redis.call('HSET', ekey, 'state', st, 'done_at', ts)
    redis.call('XADD', ns .. ':events', 'MAXLEN', '~', '100000', '*', 'type', 'exposure_done',
               'campaign', h[6] or '', 'night', h[7] or '', 'expid', h[8] or '', 'state', st,
               'ts', ts)
  end
end
local stream, id, epoch = ARGV[2], ARGV[3], tonumber(ARGV[4])
local fkey = ns .. ':frame:' .. ARGV[5] .. ':' .. ARGV[6] .. ':' .. ARGV[7]
local ekey = ns .. ':exposure:' .. ARGV[5] .. ':' .. ARGV[6]
local ts = now()
)LUA";

// Fence check shared by every script that acts for a holder.
inline constexpr const char* kFence = R"LUA(
local count, consumer = pending(stream, id)
if not count then return 0 end
if count ~= epoch then return -1 end
)LUA";

// take: ARGV[8..10] = host, pid, process. Returns {delivery count (the new epoch), tries,
// undelivered} or {0, 0, 0}; tries counts the extractions started, so that frames that only
// waited in a worker that died are not charged for its death, and undelivered those whose
// result no writer took (hand_back with ARGV[9] = 1), which are not charged either.
inline constexpr const char* kTake = R"LUA(
local count = pending(stream, id)
if not count then return {0, 0, 0} end
set_state(fkey, ekey, 'reading', ts)
redis.call('HSET', fkey, 'attempt', count, 'stream_id', id, 'host', ARGV[8], 'pid', ARGV[9],
           'process', ARGV[10])
return {count, tonumber(redis.call('HGET', fkey, 'tries') or '0'),
        tonumber(redis.call('HGET', fkey, 'undelivered') or '0')}
)LUA";

inline constexpr const char* kRenew = R"LUA(
redis.call('XCLAIM', stream, 'readers', consumer, 0, id, 'JUSTID')
return 1
)LUA";

// advance: ARGV[8..11] = state, host, pid, process. The worker that starts an extraction is
// kept in `worker` and `worker_host` (`process` becomes the writer's name afterwards).
inline constexpr const char* kAdvance = R"LUA(
redis.call('XCLAIM', stream, 'readers', consumer, 0, id, 'JUSTID')
set_state(fkey, ekey, ARGV[8], ts)
redis.call('HSET', fkey, 'host', ARGV[9], 'pid', ARGV[10], 'process', ARGV[11], 'attempt', epoch)
if ARGV[8] == 'extracting' then
  redis.call('HINCRBY', fkey, 'tries', 1)
  redis.call('HSET', fkey, 'worker', ARGV[11], 'worker_host', ARGV[9])
end
return 1
)LUA";

// note_error: ARGV[8] = error.
inline constexpr const char* kNoteError = R"LUA(
redis.call('HSET', fkey, 'error', ARGV[8], 'updated_at', ts)
return 1
)LUA";

// note_fields: ARGV[8..] = field, value, field, value, ...
inline constexpr const char* kNoteFields = R"LUA(
for i = 8, #ARGV - 1, 2 do
  redis.call('HSET', fkey, ARGV[i], ARGV[i + 1])
end
redis.call('HSET', fkey, 'updated_at', ts)
return 1
)LUA";

// hand_back: ARGV[8] = idle time to set (ms), past the lease; ARGV[9] = 1 when the frame's
// extraction finished and no writer took its result (counted in `undelivered`).
inline constexpr const char* kHandBack = R"LUA(
redis.call('XCLAIM', stream, 'readers', consumer, 0, id, 'IDLE', ARGV[8], 'JUSTID')
set_state(fkey, ekey, 'queued', ts)
if ARGV[9] == '1' then redis.call('HINCRBY', fkey, 'undelivered', 1) end
return 1
)LUA";

// fail: ARGV[8..11] = error, host, pid, process.
inline constexpr const char* kFail = R"LUA(
redis.call('XACK', stream, 'readers', id)
set_state(fkey, ekey, 'failed', ts)
redis.call('HSET', fkey, 'error', ARGV[8], 'host', ARGV[9], 'pid', ARGV[10], 'process', ARGV[11])
event('frame_failed', fkey, ts)
exposure_check(ekey, ts)
return 1
)LUA";

// finish: ARGV[8..12] = checksum, bytes, host, pid, process.
inline constexpr const char* kFinish = R"LUA(
redis.call('XACK', stream, 'readers', id)
set_state(fkey, ekey, 'done', ts)
redis.call('HSET', fkey, 'checksum', ARGV[8], 'bytes', ARGV[9], 'host', ARGV[10], 'pid', ARGV[11],
           'process', ARGV[12], 'error', '')
event('frame_done', fkey, ts)
exposure_check(ekey, ts)
return 1
)LUA";

// dead: ARGV[8] = max_deliveries. The caller has just claimed the entry (count = epoch).
inline constexpr const char* kDead = R"LUA(
local entry = redis.call('XRANGE', stream, id, id)
local last = redis.call('HGET', fkey, 'error')
local tries = redis.call('HGET', fkey, 'tries') or '0'
local reason = 'extraction started ' .. tries .. ' times, delivered ' .. count ..
               ' times (max_deliveries ' .. ARGV[8] .. ') without finishing'
if last and last ~= '' then reason = reason .. '; last error: ' .. last end
local args = {ns .. ':dead', '*'}
if #entry > 0 then
  for _, v in ipairs(entry[1][2]) do table.insert(args, v) end
end
for _, v in ipairs({'reason', reason, 'attempts', tostring(count), 'stream', stream,
                    'stream_id', id, 'dead_at', tostring(ts)}) do
  table.insert(args, v)
end
redis.call('XADD', unpack(args))
redis.call('XACK', stream, 'readers', id)
set_state(fkey, ekey, 'dead', ts)
redis.call('HSET', fkey, 'error', reason)
event('frame_dead', fkey, ts)
exposure_check(ekey, ts)
return 1
)LUA";

// submit: ARGV[2] = stream, ARGV[3] unused, ARGV[4] = force (0/1), ARGV[5..7] as usual,
// ARGV[8] = lane, ARGV[9] = night, ARGV[10..] = the job's field/value pairs.
inline constexpr const char* kSubmit = R"LUA(
local old = redis.call('HGET', fkey, 'state')
if old and old ~= 'failed' and old ~= 'dead' and old ~= 'cancelled' then
  if old ~= 'done' or ARGV[4] ~= '1' then return 0 end
end
if not old then redis.call('HINCRBY', ekey, 'nframes', 1) end
redis.call('HSETNX', ekey, 'submitted_at', ts)
redis.call('HSET', ekey, 'campaign', ARGV[5], 'expid', ARGV[6], 'lane', ARGV[8], 'night', ARGV[9],
           'state', 'active')
local member = ARGV[5] .. ':' .. ARGV[6]
redis.call('ZADD', ns .. ':exposures', 'NX', ts, member)
redis.call('SADD', ns .. ':night:' .. ARGV[9], member)
local fields = {}
for i = 10, #ARGV do table.insert(fields, ARGV[i]) end
local sid = redis.call('XADD', stream, '*', unpack(fields))
redis.call('HSET', fkey, unpack(fields))
redis.call('HSET', fkey, 'stream_id', sid, 'attempt', 0, 'tries', 0, 'undelivered', 0, 'error', '',
           'checksum', '', 'queued_at', ts)
set_state(fkey, ekey, 'queued', ts)
return 1
)LUA";

// cancel_queued: ARGV[2] = the campaign's stream, ARGV[3] = the entry id to continue after
// ('' = the group's last-delivered id), ARGV[4] = batch size. Frames of entries the readers
// have not taken move from queued to cancelled. Returns {cancelled, last id seen or ''}, so
// that a large campaign is cancelled in short scripts that never block Redis for long.
inline constexpr const char* kCancelQueued = R"LUA(
local last = ARGV[3]
if last == '' then
  last = '0-0'
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local name, delivered
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] end
      if g[i] == 'last-delivered-id' then delivered = g[i + 1] end
    end
    if name == 'readers' then last = delivered end
  end
end
local n = 0
local entries = redis.call('XRANGE', stream, '(' .. last, '+', 'COUNT', ARGV[4])
for _, e in ipairs(entries) do
  local f = {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  local fk = ns .. ':frame:' .. f['campaign'] .. ':' .. f['expid'] .. ':' .. f['camera']
  local ek = ns .. ':exposure:' .. f['campaign'] .. ':' .. f['expid']
  if redis.call('HGET', fk, 'state') == 'queued' then
    set_state(fk, ek, 'cancelled', ts)
    exposure_check(ek, ts)
    n = n + 1
  end
end
if #entries == 0 then return {n, ''} end
return {n, entries[#entries][1]}
)LUA";

}  // namespace ex2d::service::lua
