//! The Redis task store's Lua scripts: one per change, each atomic across replicas
//! (the owner check, the transition check and the write cannot interleave with another
//! replica's), all on Redis' clock. Every script starts with the transition rule as
//! Lua tables ([`rule_tables`], generated from [`check_transition`]) and the shared
//! [`PRELUDE`].

use super::super::{MAX_PROGRESS_LOG, TaskState, check_transition};

/// Shared by every script. ARGV[1..4]: prefix, ttl (ms), how long a running task's
/// record lives without an update (ms), lease (ms).
pub(super) const PRELUDE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, ttl, keep_running, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local function task_key(id) return prefix .. 'task:{' .. id .. '}' end
local function running_key(tenant) return prefix .. 'tasks:running:' .. tenant end
local function stored_key(tenant) return prefix .. 'tasks:stored:' .. tenant end
local leases = prefix .. 'tasks:leases'
-- Ends a task: its state, no lease nor input, kept `ttl` from now, out of the counts.
local function settle(key, id, to)
  local tenant = redis.call('HGET', key, 'tenant')
  redis.call('HSET', key, 'state', to, 'updated', now)
  redis.call('HDEL', key, 'lease_replica', 'lease_expires')
  for _, field in ipairs(redis.call('HKEYS', key)) do
    if string.sub(field, 1, 6) == 'input_' then redis.call('HDEL', key, field) end
  end
  redis.call('PEXPIRE', key, ttl)
  -- The tenant's kept set outlives its last task: an ended task is kept `ttl` more.
  local kept = stored_key(tenant)
  if redis.call('PTTL', kept) < ttl then redis.call('PEXPIRE', kept, ttl) end
  redis.call('SREM', running_key(tenant), id)
  redis.call('ZREM', leases, id)
end
-- The owner's task's state, or nil (missing, or another owner's). `scope` is the
-- owner's session and subject joined by \31 (neither can hold a control character;
-- a task stored before subjects were has no `subject` field: none).
local function owned_state(key, tenant, scope)
  local f = redis.call('HMGET', key, 'tenant', 'session', 'subject', 'state')
  if (not f[1]) or f[1] ~= tenant or ((f[2] or '') .. '\31' .. (f[3] or '')) ~= scope then
    return nil
  end
  return f[4]
end
";

/// A new running task unless the tenant is at one of its limits: `{'ok', fields}`,
/// `{'full', {}}` (running) or `{'kept', {}}` (its share of kept tasks). KEYS: task.
/// ARGV[5..]: id, tenant, scope (session and subject, see `owned_state`), tool, poll
/// (ms), replica, max running, owner index key, most kept.
///
/// The tenant's kept tasks are `tasks:stored:TENANT`, ids scored by creation; a task
/// leaves it only by expiring (its key is gone), so the set is healed when it looks
/// full: members without a task are dropped, then counted again. The work is bounded
/// by the share, and done only for a tenant at it.
pub(super) const CREATE: &str = r"
local id, tenant = ARGV[5], ARGV[6]
local session, subject = string.match(ARGV[7], '^(.-)\31(.*)$')
local running = running_key(tenant)
for _, other in ipairs(redis.call('SMEMBERS', running)) do
  local state = redis.call('HGET', task_key(other), 'state')
  if not (state and is_running[state]) then redis.call('SREM', running, other) end
end
if redis.call('SCARD', running) >= tonumber(ARGV[11]) then return {'full', {}} end
local kept, share = stored_key(tenant), tonumber(ARGV[13])
if redis.call('ZCARD', kept) >= share then
  for _, other in ipairs(redis.call('ZRANGE', kept, 0, -1)) do
    if redis.call('EXISTS', task_key(other)) == 0 then redis.call('ZREM', kept, other) end
  end
  if redis.call('ZCARD', kept) >= share then return {'kept', {}} end
end
redis.call('HSET', KEYS[1], 'tenant', tenant, 'session', session, 'subject', subject, 'tool', ARGV[8],
  'created', now, 'updated', now, 'state', 'working', 'poll', ARGV[9],
  'lease_replica', ARGV[10], 'lease_expires', now + lease)
redis.call('PEXPIRE', KEYS[1], keep_running)
redis.call('SADD', running, id)
redis.call('PEXPIRE', running, keep_running)
redis.call('ZADD', kept, now, id)
redis.call('PEXPIRE', kept, keep_running)
redis.call('ZADD', leases, now + lease, id)
redis.call('ZADD', ARGV[12], 0, string.format('%015d', now) .. ':' .. id)
redis.call('PEXPIRE', ARGV[12], keep_running)
return {'ok', redis.call('HGETALL', KEYS[1])}
";

/// Moves the owner's task to a state (checked) and writes fields:
/// `{'ok', fields}`, `{'missing', {}}` or `{'refused', {current state}}`.
/// KEYS: task. ARGV[5..]: id, tenant, scope, target state ('' keeps the current
/// one), then field, value pairs.
pub(super) const TRANSITION: &str = r"
local key, id = KEYS[1], ARGV[5]
local from = owned_state(key, ARGV[6], ARGV[7])
if not from then return {'missing', {}} end
local to = ARGV[8]
if to == '' then to = from end
if not (allowed[from] and allowed[from][to]) then return {'refused', {from}} end
for i = 9, #ARGV, 2 do
  redis.call('HSET', key, ARGV[i], ARGV[i + 1])
  if ARGV[i] == 'progress' then
    local count = tonumber(redis.call('HGET', key, 'progress_count') or '0')
    if count < max_progress_log then
      local log = redis.call('HGET', key, 'progress_log')
      if log then log = log .. ',' .. ARGV[i + 1] else log = ARGV[i + 1] end
      redis.call('HSET', key, 'progress_log', log, 'progress_count', count + 1)
    end
  end
end
if is_running[to] then
  redis.call('HSET', key, 'state', to, 'updated', now)
  redis.call('PEXPIRE', key, keep_running)
else
  settle(key, id, to)
end
return {'ok', redis.call('HGETALL', key)}
";

/// Extends the lease of the replica's running task: `{'ok', fields}`,
/// `{'missing', {}}`, `{'refused', {state}}` or `{'lost', {holder}}`.
/// KEYS: task. ARGV[5..]: id, tenant, scope, replica.
pub(super) const RENEW: &str = r"
local key, id = KEYS[1], ARGV[5]
local state = owned_state(key, ARGV[6], ARGV[7])
if not state then return {'missing', {}} end
if not is_running[state] then return {'refused', {state}} end
local holder = redis.call('HGET', key, 'lease_replica')
if holder ~= ARGV[8] then return {'lost', {holder or ''}} end
redis.call('HSET', key, 'lease_expires', now + lease)
redis.call('ZADD', leases, now + lease, id)
return {'ok', redis.call('HGETALL', key)}
";

/// Records an input request of the owner's running task and makes it
/// `input_required`: `{'ok', fields}`, `{'missing', {}}`, `{'refused', {state}}` or
/// `{'used', {}}` (the key was asked or answered before), `{'full', {}}`.
/// KEYS: task. ARGV[5..]: id, tenant, scope, key, the request's JSON, most pending.
pub(super) const ASK: &str = r"
local key = KEYS[1]
local state = owned_state(key, ARGV[6], ARGV[7])
if not state then return {'missing', {}} end
if not (allowed[state] and allowed[state]['input_required']) then return {'refused', {state}} end
local ask, answer = 'input_request:' .. ARGV[8], 'input_response:' .. ARGV[8]
if redis.call('HEXISTS', key, ask) == 1 or redis.call('HEXISTS', key, answer) == 1 then
  return {'used', {}}
end
local pending = 0
for _, field in ipairs(redis.call('HKEYS', key)) do
  if string.sub(field, 1, 14) == 'input_request:' then pending = pending + 1 end
end
if pending >= tonumber(ARGV[10]) then return {'full', {}} end
redis.call('HSET', key, ask, ARGV[9], 'state', 'input_required', 'updated', now)
redis.call('PEXPIRE', key, keep_running)
return {'ok', redis.call('HGETALL', key)}
";

/// Records the owner's answers to pending requests (others are ignored); back to
/// `working` when none is pending: `{'ok', fields}` or `{'missing', {}}`.
/// KEYS: task. ARGV[5..]: id, tenant, scope, then key, answer JSON pairs.
pub(super) const ANSWER: &str = r"
local key = KEYS[1]
local state = owned_state(key, ARGV[6], ARGV[7])
if not state then return {'missing', {}} end
if is_running[state] then
  local changed = false
  for i = 8, #ARGV, 2 do
    if redis.call('HDEL', key, 'input_request:' .. ARGV[i]) == 1 then
      redis.call('HSET', key, 'input_response:' .. ARGV[i], ARGV[i + 1])
      changed = true
    end
  end
  if changed then
    local pending = false
    for _, field in ipairs(redis.call('HKEYS', key)) do
      if string.sub(field, 1, 14) == 'input_request:' then pending = true break end
    end
    if state == 'input_required' and not pending then redis.call('HSET', key, 'state', 'working') end
    redis.call('HSET', key, 'updated', now)
    redis.call('PEXPIRE', key, keep_running)
  end
end
return {'ok', redis.call('HGETALL', key)}
";

/// Fails up to ARGV[5] running tasks whose lease ran out, with reason ARGV[6];
/// returns their ids.
pub(super) const REAP: &str = r"
local due = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
local reaped = {}
for _, id in ipairs(due) do
  local key = task_key(id)
  local state = redis.call('HGET', key, 'state')
  if state and allowed[state] and allowed[state]['failed'] then
    redis.call('HSET', key, 'error', ARGV[6])
    settle(key, id, 'failed')
    reaped[#reaped + 1] = id
  else
    redis.call('ZREM', leases, id)
  end
end
return reaped
";

/// Up to ARGV[7] index members from ARGV[6] (a ZRANGEBYLEX bound) with their
/// task's fields (empty for an expired task, whose member is dropped).
/// ARGV[5]: the owner index key.
pub(super) const LIST: &str = r"
local members = redis.call('ZRANGEBYLEX', ARGV[5], ARGV[6], '+', 'LIMIT', 0, tonumber(ARGV[7]))
local out = {}
for _, member in ipairs(members) do
  local id = string.sub(member, 17)
  local fields = redis.call('HGETALL', task_key(id))
  if #fields == 0 then redis.call('ZREM', ARGV[5], member) end
  out[#out + 1] = {member, fields}
end
return out
";

/// The transition rule as Lua tables: `allowed[from][to]` and `is_running[state]`,
/// generated from [`check_transition`] so the scripts cannot disagree with it.
pub(super) fn rule_tables() -> String {
    let mut lua = format!(
        "local allowed = {{}}\nlocal is_running = {{}}\nlocal max_progress_log = {MAX_PROGRESS_LOG}\n"
    );
    for from in TaskState::ALL {
        let to: Vec<String> = TaskState::ALL
            .into_iter()
            .filter(|to| check_transition(from, *to).is_ok())
            .map(|to| format!("{} = true", to.as_str()))
            .collect();
        lua.push_str(&format!(
            "allowed.{} = {{{}}}\n",
            from.as_str(),
            to.join(", ")
        ));
        if !from.is_terminal() {
            lua.push_str(&format!("is_running.{} = true\n", from.as_str()));
        }
    }
    lua
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_rule_is_the_transition_function() {
        let rules = rule_tables();
        assert!(rules.contains("allowed.working = {working = true, input_required = true, completed = true, failed = true, cancelled = true}"), "{rules}");
        assert!(rules.contains("allowed.completed = {}"), "{rules}");
        assert!(
            rules.contains("is_running.input_required = true"),
            "{rules}"
        );
        assert!(!rules.contains("is_running.failed"), "{rules}");
    }
}
