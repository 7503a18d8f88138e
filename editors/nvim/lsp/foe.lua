-- foe's server configuration for Neovim 0.8+ in the nvim-lspconfig / `vim.lsp.config` shape (Neovim 0.11
-- reads `lsp/foe.lua` from the runtimepath; with nvim-lspconfig or `vim.lsp.start` pass the table yourself):
--
--   vim.opt.runtimepath:append("/path/to/foe/editors/nvim")
--   vim.lsp.enable("foe")                                   -- Neovim 0.11+
--   -- or: vim.lsp.start(vim.tbl_extend("force", dofile(".../lsp/foe.lua"), { root_dir = vim.fn.getcwd() }))
--
-- Settings are the `foe` section (README, "Settings"); `require("foe").status()` and the `foe/status`
-- handler below work the same as with the 0.7 plugin in lua/foe/init.lua.
return {
  cmd = { "foe", "lsp" },
  filetypes = { "c" },
  root_markers = { "compile_commands.json", "build/compile_commands.json", ".git" },
  settings = { foe = {} },
  init_options = {},
  handlers = {
    ["foe/status"] = function(err, result, ctx, config)
      local ok, foe = pcall(require, "foe")
      if ok and foe.handle_status then
        foe.handle_status(err, result, ctx, config)
      end
    end,
  },
}
