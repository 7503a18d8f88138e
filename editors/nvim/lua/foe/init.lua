-- foe: fast-math exception divergences in Neovim, through the `foe lsp` language server.
--
-- Works with Neovim 0.7 and later (it uses vim.lsp.start_client + vim.lsp.buf_attach_client, not the newer
-- vim.lsp.start). Usage:
--
--   require("foe").setup {
--     cmd = { "foe", "lsp" },                  -- how to start the server
--     settings = { foe = { radius = 3 } },     -- the `foe` settings section (see docs/editors.md)
--   }
--
-- Commands: :FoeTrace (inputs and both traces of the divergence under the cursor), :FoeAnalyse (re-analyse
-- now), :FoeStats (cache counters), :FoeStatus (what foe is doing for this buffer), :FoeRestart.
--
-- Status: the server's `$/progress` is echoed while a file is analysed (`progress = false` turns that off),
-- and `require("foe").status()` gives a short text for the statusline ("foe: 2 warnings, 5 other, 1 not
-- analysed", "foe: analysing", "foe: stale (does not compile)"); the `User FoeStatus` autocommand fires when
-- it changes. For Neovim 0.8+ with nvim-lspconfig or `vim.lsp.config`, `lsp/foe.lua` beside this plugin
-- holds the same server configuration.

local M = {}

local defaults = {
  cmd = { "foe", "lsp" },
  filetypes = { "c" },
  -- Files that mark a project's root (the first found upwards from the file); else the file's directory.
  root_markers = { "compile_commands.json", "build/compile_commands.json", ".git" },
  settings = { foe = {} },
  on_attach = nil,
  -- Echo the server's `$/progress` messages while a file is analysed.
  progress = true,
}

-- The latest `foe/status` per document URI.
local statuses = {}

local function notify_status()
  vim.cmd("silent! doautocmd <nomodeline> User FoeStatus")
  vim.cmd("silent! redrawstatus")
end

local handlers = {
  ["foe/status"] = function(_, result)
    if type(result) == "table" and result.uri then
      statuses[result.uri] = result
      notify_status()
    end
  end,
  ["$/progress"] = function(err, result, ctx, config)
    local default = vim.lsp.handlers["$/progress"]
    if default then
      default(err, result, ctx, config)
    end
    local value = type(result) == "table" and result.value or nil
    if M.config.progress and type(value) == "table" then
      local text = value.title or value.message or ""
      if value.kind == "report" and value.message then
        text = "foe: " .. value.message
      elseif value.kind == "end" then
        text = ""
      end
      -- Short enough never to ask for Enter.
      local width = math.max(vim.o.columns - 12, 10)
      vim.api.nvim_echo({ { text:sub(1, width) } }, false, {})
    end
  end,
}

M.config = vim.deepcopy(defaults)
-- One client per root directory.
local clients = {}

local function find_root(path)
  local dir = vim.fn.fnamemodify(path, ":p:h")
  for _, marker in ipairs(M.config.root_markers) do
    local found = vim.fn.findfile(marker, dir .. ";")
    if found == "" then
      found = vim.fn.finddir(marker, dir .. ";")
    end
    if found ~= "" then
      local full = (vim.fn.fnamemodify(found, ":p"):gsub("/$", ""))
      return full:sub(1, #full - #marker - 1)
    end
  end
  return dir
end

local function client_for(root)
  local id = clients[root]
  if id then
    local client = vim.lsp.get_client_by_id(id)
    if client and not client.is_stopped() then
      return id
    end
  end
  local settings = M.config.settings or {}
  id = vim.lsp.start_client({
    name = "foe",
    cmd = M.config.cmd,
    root_dir = root,
    settings = settings,
    init_options = settings.foe or {},
    on_attach = M.config.on_attach,
    handlers = handlers,
  })
  clients[root] = id
  return id
end

--- Starts (or reuses) the server for a buffer and attaches it.
function M.attach(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" then
    return nil
  end
  local id = client_for(find_root(name))
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

--- The foe client attached to a buffer, if any.
function M.client(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  for _, client in pairs(vim.lsp.buf_get_clients(bufnr)) do
    if client.name == "foe" then
      return client
    end
  end
  return nil
end

--- The `foe/status` handler, for configurations that start the server themselves (lsp/foe.lua).
function M.handle_status(err, result, ctx, config)
  handlers["foe/status"](err, result, ctx, config)
end

--- A short text for the statusline: what foe says about the buffer, or "" when it is not attached.
function M.status(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not M.client(bufnr) then
    return ""
  end
  local s = statuses[vim.uri_from_bufnr(bufnr)]
  if not s then
    return "foe: waiting"
  end
  if s.state == "idle" or s.state == "incomplete" then
    local text = string.format("foe: %d warning%s, %d other", s.warnings or 0, (s.warnings == 1) and "" or "s",
      (s.information or 0) + (s.hints or 0))
    -- incomplete: the analysis ended, but some function was hardly compared
    if (s.incomplete or 0) > 0 then
      text = text .. string.format(", %d not compared", s.incomplete)
    end
    if (s.skipped or 0) > 0 then
      text = text .. string.format(", %d not analysed", s.skipped)
    end
    return text
  elseif s.state == "stale" then
    return "foe: stale (" .. (s.message or "does not compile"):gsub(":.*", "") .. ")"
  end
  return "foe: " .. s.state
end

--- The full `foe/status` of a buffer (state, message, counts), or nil.
function M.status_details(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  return statuses[vim.uri_from_bufnr(bufnr)]
end

--- The markdown of `foe/trace` at the cursor (every shown input with both traces), or nil.
function M.trace_markdown(bufnr, timeout_ms)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local client = M.client(bufnr)
  if not client then
    return nil, "foe is not attached to this buffer"
  end
  local params = vim.lsp.util.make_position_params()
  local response, err = client.request_sync("foe/trace", params, timeout_ms or 10000, bufnr)
  if not response then
    return nil, err
  end
  if response.err then
    return nil, response.err.message
  end
  if response.result == nil or response.result == vim.NIL then
    return nil, "no divergence on this line"
  end
  return response.result.markdown
end

--- :FoeTrace — shows the inputs and both traces of the divergence on the cursor line in a floating window.
function M.show_trace()
  local markdown, err = M.trace_markdown()
  if not markdown then
    vim.notify("foe: " .. tostring(err), vim.log.levels.INFO)
    return
  end
  local lines = vim.split(markdown, "\n", true)
  vim.lsp.util.open_floating_preview(lines, "markdown", { border = "rounded", max_width = 120 })
end

--- :FoeAnalyse — re-analyses the current buffer now.
function M.analyse()
  local client = M.client()
  if client then
    client.request("workspace/executeCommand", { command = "foe.analyse", arguments = { vim.uri_from_bufnr(0) } })
  end
end

--- :FoeStats — prints the server's cache counters and per-function cache state.
function M.stats()
  local client = M.client()
  if not client then
    return
  end
  local response = client.request_sync("foe/stats", nil, 5000, 0)
  if response and response.result then
    print(vim.inspect(response.result))
  end
end

--- :FoeRestart — stops the servers and attaches every foe buffer to a fresh one.
function M.restart()
  for root, id in pairs(clients) do
    vim.lsp.stop_client(id)
    clients[root] = nil
  end
  vim.defer_fn(function()
    for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(bufnr) and vim.tbl_contains(M.config.filetypes, vim.bo[bufnr].filetype) then
        M.attach(bufnr)
      end
    end
  end, 200)
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  local group = vim.api.nvim_create_augroup("foe", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = M.config.filetypes,
    callback = function(args)
      M.attach(args.buf)
    end,
  })
  vim.api.nvim_create_user_command("FoeTrace", M.show_trace, { desc = "foe: inputs and traces of the divergence here" })
  vim.api.nvim_create_user_command("FoeAnalyse", M.analyse, { desc = "foe: re-analyse this buffer now" })
  vim.api.nvim_create_user_command("FoeStats", M.stats, { desc = "foe: cache statistics" })
  vim.api.nvim_create_user_command("FoeRestart", M.restart, { desc = "foe: restart the language server" })
  vim.api.nvim_create_user_command("FoeStatus", function()
    local s = M.status_details()
    print(s and ("foe: " .. s.state .. ": " .. (s.message or "")) or M.status())
  end, { desc = "foe: what foe is doing for this buffer" })
  -- Buffers already open when setup runs.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.tbl_contains(M.config.filetypes, vim.bo[bufnr].filetype) then
      M.attach(bufnr)
    end
  end
end

return M
