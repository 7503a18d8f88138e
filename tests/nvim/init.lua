-- Headless Neovim session driven by tests/tests/nvim_e2e.rs: the real Neovim LSP client and the foe plugin
-- against the real `foe lsp`. It opens the fixture, waits for diagnostics, requests a hover and :FoeTrace's
-- markdown, applies the verified quick fix, waits for the re-analysis, and writes what it saw as JSON to
-- $FOE_NVIM_OUT after every step (so a time-out still leaves the steps done so far).
--
-- Environment: FOE_NVIM_PLUGIN (editors/nvim), FOE_BIN (the foe binary), FOE_NVIM_FILE (the fixture),
-- FOE_NVIM_OUT (the JSON result), FOE_NVIM_TIMEOUT_MS (longest wait for one analysis).

local out_path = assert(os.getenv("FOE_NVIM_OUT"), "FOE_NVIM_OUT")
local results = { steps = {} }

local function save()
  vim.fn.writefile({ vim.fn.json_encode(results) }, out_path)
end

local function step(name, value)
  results.steps[#results.steps + 1] = name
  results[name] = value
  save()
end

local function diagnostics(bufnr)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    local lsp = (d.user_data or {}).lsp or {}
    out[#out + 1] = {
      lnum = d.lnum,
      col = d.col,
      severity = d.severity,
      source = d.source,
      code = d.code,
      message = d.message,
      ["function"] = (lsp.data or {})["function"],
      cause = ((lsp.data or {}).cause or {}).id,
    }
  end
  table.sort(out, function(a, b)
    return a.lnum < b.lnum
  end)
  return out
end

local function find(list, fn_name)
  for _, d in ipairs(list) do
    if d["function"] == fn_name then
      return d
    end
  end
  return nil
end

local function main()
  local timeout = tonumber(os.getenv("FOE_NVIM_TIMEOUT_MS") or "300000")
  vim.opt.runtimepath:prepend((assert(os.getenv("FOE_NVIM_PLUGIN"), "FOE_NVIM_PLUGIN")))
  vim.cmd("filetype on")
  local foe = require("foe")
  foe.setup({ cmd = { assert(os.getenv("FOE_BIN"), "FOE_BIN"), "lsp" }, settings = { foe = {} } })
  vim.cmd("edit " .. vim.fn.fnameescape((assert(os.getenv("FOE_NVIM_FILE"), "FOE_NVIM_FILE"))))
  local bufnr = vim.api.nvim_get_current_buf()
  step("filetype", vim.bo.filetype)

  local got = vim.wait(timeout, function()
    return #vim.diagnostic.get(bufnr) > 0
  end, 50)
  step("attached", foe.client(bufnr) ~= nil)
  -- The status at rest, from `foe/status`: the analysis's own diagnostics, not a first look's (on a loaded machine
  -- the analysis can take far longer than the first look).
  vim.wait(timeout, function()
    local s = foe.status_details(bufnr)
    return s ~= nil and s.state ~= "analysing"
  end, 50)
  step("status", foe.status(bufnr))
  local first = diagnostics(bufnr)
  step("diagnostics", got and first or {})
  if not got then
    return
  end

  -- Hover and :FoeTrace on turbine1's flagged line.
  local turbine = find(first, "turbine1")
  if turbine then
    vim.api.nvim_win_set_cursor(0, { turbine.lnum + 1, turbine.col })
    local responses = vim.lsp.buf_request_sync(bufnr, "textDocument/hover", vim.lsp.util.make_position_params(), 60000)
    local hover = ""
    for _, r in pairs(responses or {}) do
      if r.result and r.result.contents then
        hover = r.result.contents.value or ""
      end
    end
    step("hover", hover)
    step("trace", foe.trace_markdown(bufnr, 60000) or "")
  end

  -- The quick fix on identity, applied as the user would.
  local identity = find(first, "identity")
  if not identity then
    return
  end
  vim.api.nvim_win_set_cursor(0, { identity.lnum + 1, identity.col })
  local params = vim.lsp.util.make_range_params()
  params.context = { diagnostics = vim.lsp.diagnostic.get_line_diagnostics(bufnr, identity.lnum) }
  -- Answered at once ("verifying" while the background check runs); asked again until verified.
  local chosen, titles = nil, {}
  local started = vim.loop.hrtime()
  vim.wait(timeout, function()
    local sent = vim.loop.hrtime()
    local responses = vim.lsp.buf_request_sync(bufnr, "textDocument/codeAction", params, timeout)
    if results.first_code_action_ms == nil then
      results.first_code_action_ms = (vim.loop.hrtime() - sent) / 1e6
    end
    titles = {}
    for _, r in pairs(responses or {}) do
      for _, action in ipairs(r.result or {}) do
        titles[#titles + 1] = action.title
        if action.isPreferred and not chosen then
          chosen = action
        end
      end
    end
    return chosen ~= nil
  end, 200)
  results.verified_after_ms = (vim.loop.hrtime() - started) / 1e6
  step("code_actions", titles)
  if not chosen then
    return
  end
  vim.lsp.util.apply_workspace_edit(chosen.edit, foe.client(bufnr).offset_encoding)
  step("fixed_text", table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n"))

  -- Cleared: identity keeps only what the link flags cause (flush-to-zero), which no source edit reaches.
  local cleared = vim.wait(timeout, function()
    local now = diagnostics(bufnr)
    if #now == 0 then
      return false
    end
    for _, d in ipairs(now) do
      if d["function"] == "identity" and d.cause ~= "flush_to_zero" then
        return false
      end
    end
    return true
  end, 50)
  step("after_fix", cleared and diagnostics(bufnr) or {})
end

vim.defer_fn(function()
  local ok, err = xpcall(main, debug.traceback)
  if not ok then
    step("error", tostring(err))
  end
  step("done", true)
  vim.cmd("qa!")
end, 0)
