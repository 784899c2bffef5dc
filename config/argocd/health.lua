-- Argo CD health of Deckhand objects (apps.deckhand.dev: PodSet, SidecarSet,
-- WebServer, RestartSchedule), read from the conditions every kind sets:
-- Ready (always present once Deckhand has written the status), Stalled
-- (present only while progress is blocked) and the generation each
-- describes. One script serves the four kinds; argocd-cm.yaml installs it.
-- Argo CD runs it with only the base and table libraries: no string methods.
local hs = {status = "Progressing", message = "Waiting for Deckhand to report status"}
if obj.status == nil or obj.status.conditions == nil then
  return hs
end

local generation = obj.metadata.generation
if generation ~= nil and obj.status.observedGeneration ~= nil and obj.status.observedGeneration < generation then
  hs.message = "Waiting for Deckhand to observe generation " .. generation
  return hs
end

local ready, stalled, suspended
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Ready" then
    ready = c
  elseif c.type == "Stalled" and c.status == "True" then
    stalled = c
  elseif c.type == "Suspended" and c.status == "True" then
    suspended = c
  end
end

-- A verdict about an older generation says nothing about the current spec.
if ready == nil or (generation ~= nil and ready.observedGeneration ~= nil and ready.observedGeneration < generation) then
  return hs
end

local function describe(c)
  if c.message == nil or c.message == "" then
    return c.reason
  end
  return c.reason .. ": " .. c.message
end

if stalled ~= nil then
  return {status = "Degraded", message = describe(stalled)}
end
if suspended ~= nil then
  -- A suspended RestartSchedule starts no run, as a suspended CronJob.
  return {status = "Suspended", message = describe(suspended)}
end
if ready.status == "True" then
  return {status = "Healthy", message = describe(ready)}
end
if ready.reason == "UpdatePaused" then
  -- A SidecarSet rollout paused by updateStrategy.paused.
  return {status = "Suspended", message = describe(ready)}
end
if obj.kind == "RestartSchedule" then
  -- Its last run failed or was missed, as a CronJob whose last Job failed.
  return {status = "Degraded", message = describe(ready)}
end
-- Rolling out, or pods not Ready yet: Deckhand or the kubelet is at work.
return {status = "Progressing", message = describe(ready)}
