-- A transcript of a Neovim session on one file, for docs/editors.md (run by scripts/nvim-transcript.sh): the
-- foe plugin and the real `foe lsp` in headless Neovim open FOE_NVIM_FILE (from the directory of its
-- compile_commands.json), wait until the analysis is at rest, and write to FOE_NVIM_OUT, as plain text, what a
-- user sees: when the first diagnostics came, the statusline, the diagnostics, the hover of the first warning
-- (else of the first diagnostic) and the quick fixes offered there once their verification has ended.
--
-- Environment: FOE_NVIM_PLUGIN (editors/nvim), FOE_BIN, FOE_NVIM_FILE, FOE_NVIM_OUT, FOE_NVIM_TIMEOUT_MS,
-- FOE_NVIM_FIX_WAIT_MS (how long to wait for a fix's verification), FOE_NVIM_MAX_DIAGNOSTICS.

local out_path = assert(os.getenv("FOE_NVIM_OUT"), "FOE_NVIM_OUT")
local lines = {}

local function say(text)
  for line in (text .. "\n"):gmatch("(.-)\n") do
    lines[#lines + 1] = line
  end
  vim.fn.writefile(lines, out_path)
end

local severity = { "E", "W", "I", "H" }

local function sorted_diagnostics(bufnr)
  local all = vim.diagnostic.get(bufnr)
  table.sort(all, function(a, b)
    if a.severity ~= b.severity then
      return a.severity < b.severity
    end
    return a.lnum < b.lnum
  end)
  return all
end

local function main()
  local timeout = tonumber(os.getenv("FOE_NVIM_TIMEOUT_MS") or "300000")
  local fix_wait = tonumber(os.getenv("FOE_NVIM_FIX_WAIT_MS") or "60000")
  local max_shown = tonumber(os.getenv("FOE_NVIM_MAX_DIAGNOSTICS") or "12")
  vim.opt.runtimepath:prepend((assert(os.getenv("FOE_NVIM_PLUGIN"), "FOE_NVIM_PLUGIN")))
  vim.cmd("filetype on")
  local foe = require("foe")
  foe.setup({ cmd = { assert(os.getenv("FOE_BIN"), "FOE_BIN"), "lsp" }, settings = { foe = {} } })
  local file = assert(os.getenv("FOE_NVIM_FILE"), "FOE_NVIM_FILE")
  local started = vim.loop.hrtime()
  local elapsed = function()
    return string.format("%.1f s", (vim.loop.hrtime() - started) / 1e9)
  end
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()

  local got = vim.wait(timeout, function()
    return #vim.diagnostic.get(bufnr) > 0
  end, 20)
  say(string.format("$ nvim %s", file))
  say(string.format("first diagnostics after %s: %d (statusline: %s)", elapsed(), #vim.diagnostic.get(bufnr), foe.status(bufnr)))
  vim.wait(timeout, function()
    local s = foe.status_details(bufnr)
    return s ~= nil and s.state ~= "analysing"
  end, 50)
  local details = foe.status_details(bufnr) or {}
  say(string.format("at rest after %s; statusline: %s", elapsed(), foe.status(bufnr)))
  say(string.format(":FoeStatus  foe: %s: %s", details.state or "?", details.message or ""))
  if not got then
    say("no diagnostics")
    return
  end

  local all = sorted_diagnostics(bufnr)
  say("")
  say(string.format("vim.diagnostic.get(0): %d diagnostics, warnings first (line:column, severity, code, message)", #all))
  for i, d in ipairs(all) do
    if i > max_shown then
      say(string.format("... %d more", #all - max_shown))
      break
    end
    say(string.format("%d:%d  %s  %s  %s", d.lnum + 1, d.col + 1, severity[d.severity] or "?", d.code or "", d.message))
  end

  local first = all[1]
  vim.api.nvim_win_set_cursor(0, { first.lnum + 1, first.col })
  local responses = vim.lsp.buf_request_sync(bufnr, "textDocument/hover", vim.lsp.util.make_position_params(), 60000)
  for _, r in pairs(responses or {}) do
    if r.result and r.result.contents then
      say("")
      say(string.format("hover at %d:%d:", first.lnum + 1, first.col + 1))
      say("")
      say(r.result.contents.value or "")
    end
  end

  -- The quick fixes there, asked again until no verification is running (or fix_wait has passed).
  local params = vim.lsp.util.make_range_params()
  params.context = { diagnostics = vim.lsp.diagnostic.get_line_diagnostics(bufnr, first.lnum) }
  local asked = vim.loop.hrtime()
  local titles = {}
  vim.wait(fix_wait, function()
    titles = {}
    local pending = false
    local answers = vim.lsp.buf_request_sync(bufnr, "textDocument/codeAction", params, fix_wait)
    for _, r in pairs(answers or {}) do
      for _, action in ipairs(r.result or {}) do
        titles[#titles + 1] = action.title .. (action.isPreferred and " (preferred)" or "")
        pending = pending or action.title:find("verifying") ~= nil
      end
    end
    return not pending
  end, 500)
  say("")
  say(string.format("quick fixes at %d:%d after %.1f s more:", first.lnum + 1, first.col + 1, (vim.loop.hrtime() - asked) / 1e9))
  if #titles == 0 then
    say("  none")
  end
  for _, t in ipairs(titles) do
    say("  " .. t)
  end
end

vim.defer_fn(function()
  local ok, err = xpcall(main, debug.traceback)
  if not ok then
    say("error: " .. tostring(err))
  end
  vim.cmd("qa!")
end, 0)
