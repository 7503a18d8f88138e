// clang's driver and its cc1 front end, run in the process that calls them: what the `clang` executable's main
// does (clang/tools/driver/driver.cpp and cc1_main.cpp, LLVM 19), on the same libraries, without the process
// start (dynamic relocation of libLLVM and libclang-cpp, static constructors) that costs each `clang` about a
// third of a small compile. foe-cc forks a child per compile and calls `foe_cc_compile` in it.
#include "clang/Basic/Diagnostic.h"
#include "clang/Basic/DiagnosticOptions.h"
#include "clang/CodeGen/ObjectFilePCHContainerOperations.h"
#include "clang/Driver/Compilation.h"
#include "clang/Driver/Driver.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/CompilerInvocation.h"
#include "clang/Frontend/TextDiagnosticBuffer.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/FrontendTool/Utils.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <memory>

using namespace clang;

namespace {

// The path the driver believes it runs from: it finds clang's resource directory (its own headers) and the GCC
// installation from it, as the `clang` executable does from its own path.
const char *ClangPath = nullptr;

// cc1_main: one front-end invocation; `ArgV` is the driver's job, "clang -cc1 ...".
int RunCC1(llvm::SmallVectorImpl<const char *> &ArgV) {
  llvm::ArrayRef<const char *> Args(ArgV);
  if (Args.size() < 2 || llvm::StringRef(Args[1]) != "-cc1") {
    llvm::errs() << "foe-cc: a driver job that is not -cc1: " << (Args.size() > 1 ? Args[1] : "") << "\n";
    return 1;
  }
  Args = Args.slice(2);
  auto Clang = std::make_unique<CompilerInstance>();
  auto PCHOps = Clang->getPCHContainerOperations();
  PCHOps->registerWriter(std::make_unique<ObjectFilePCHContainerWriter>());
  PCHOps->registerReader(std::make_unique<ObjectFilePCHContainerReader>());
  llvm::IntrusiveRefCntPtr<DiagnosticIDs> DiagID(new DiagnosticIDs());
  llvm::IntrusiveRefCntPtr<DiagnosticOptions> DiagOpts = new DiagnosticOptions();
  auto *Buffer = new TextDiagnosticBuffer;
  DiagnosticsEngine Diags(DiagID, &*DiagOpts, Buffer);
  bool Ok = CompilerInvocation::CreateFromArgs(Clang->getInvocation(), Args, Diags, ClangPath);
  Clang->createDiagnostics();
  if (!Clang->hasDiagnostics())
    return 1;
  Buffer->FlushDiagnostics(Clang->getDiagnostics());
  if (!Ok)
    return 1;
  Ok = ExecuteCompilerInvocation(Clang.get());
  llvm::outs().flush();
  llvm::errs().flush();
  return Ok ? 0 : 1;
}

} // namespace

extern "C" {

// Registers the targets once, before the first fork, so that no child does it again.
void foe_cc_init(const char *clang_path) {
  ClangPath = clang_path;
  llvm::InitializeAllTargets();
  llvm::InitializeAllTargetMCs();
  llvm::InitializeAllAsmPrinters();
  llvm::InitializeAllAsmParsers();
}

// clang's main on `argv` (without the program name): the exit code `clang` would give.
int foe_cc_compile(int argc, const char *const *argv) {
  llvm::SmallVector<const char *, 64> Args;
  Args.push_back(ClangPath);
  Args.append(argv, argv + argc);
  llvm::IntrusiveRefCntPtr<DiagnosticOptions> DiagOpts = new DiagnosticOptions();
  auto *Client = new TextDiagnosticPrinter(llvm::errs(), &*DiagOpts);
  Client->setPrefix(std::string(llvm::sys::path::filename(ClangPath)));
  llvm::IntrusiveRefCntPtr<DiagnosticIDs> DiagID(new DiagnosticIDs());
  DiagnosticsEngine Diags(DiagID, &*DiagOpts, Client);
  driver::Driver TheDriver(ClangPath, llvm::sys::getDefaultTargetTriple(), Diags);
  TheDriver.CC1Main = RunCC1;
  std::unique_ptr<driver::Compilation> C(TheDriver.BuildCompilation(Args));
  int Result = 1;
  if (C && !C->containsError()) {
    llvm::SmallVector<std::pair<int, const driver::Command *>, 4> Failing;
    Result = TheDriver.ExecuteCompilation(*C, Failing);
    // As clang's main: the first failing job's code when the driver itself reports none.
    for (const auto &F : Failing)
      if (Result == 0)
        Result = F.first;
  }
  if (Result == 0 && Diags.hasErrorOccurred())
    Result = 1;
  Diags.getClient()->finish();
  llvm::outs().flush();
  llvm::errs().flush();
  return Result;
}

} // extern "C"
