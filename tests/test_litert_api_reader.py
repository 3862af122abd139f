"""The reader behind tests/data/litert-api.json (da3_litert_farm.dev.litert_api) on small Kotlin and Swift sources
in LiteRT's layout, committed to a git repository here: the table written out by hand from those sources."""

from __future__ import annotations

import json
import subprocess

from da3_litert_farm.dev.litert_api import main, read_api

KOTLIN = '''package com.google.ai.edge.litert

/** A comment with a brace { and a `fun hidden()` that is not code. */
enum class Accelerator private constructor(val value: Int) {
  NONE(0),
  GPU(2);

  companion object {
    internal fun of(value: Int): Accelerator = NONE
  }
}

class CompiledModel
private constructor(handle: Long, private val env: Environment) : JniHandle(handle) {

  data class GpuOptions
  constructor(
    val precision: Precision? = null,
    val label: String? = "a { brace in a string",
  ) {
    enum class Precision constructor(val value: Int) {
      DEFAULT(0),
      FP16(1),
    }

    internal enum class Key constructor(val value: Int) {
      PRECISION(3),
    }
  }

  class Options constructor(internal val accelerators: Set<Accelerator>) {
    constructor(vararg accelerators: Accelerator) : this(setOf(*accelerators)) {}

    var gpuOptions: GpuOptions? = null
  }

  @JvmOverloads
  fun createInputBuffers(signatureIndex: Int = 0): List<TensorBuffer> {
    val handles = nativeCreate(signatureIndex)
    return handles.map { TensorBuffer(it) }
  }

  private fun nativeCreate(index: Int): LongArray = LongArray(0)

  companion object {
    init {
      System.loadLibrary("litert_jni")
    }

    @JvmStatic
    fun create(filePath: String, options: Options = Options.CPU, optionalEnv: Environment? = null): CompiledModel {
      return CompiledModel(0, Environment())
    }
  }
}
'''

SWIFT = '''import Foundation

public enum Accelerator: Int32 {
  case none = 0
  case cpu, gpu
}

public final class Options {
  let cOptions: Int
  public init() throws { cOptions = 0 }
  public func setHardwareAccelerators(_ accelerators: Set<Accelerator>) throws {
    let inner = 1  // not a member
  }
  func internalHelper() {}
}

public final class CompiledModel {
  public init(filePath: String, environment: Environment, options: Options? = nil) throws {}
  public func run(
    inputs: [TensorBuffer],
    outputs: [TensorBuffer],
    signatureIndex: Int = 0
  ) throws {}
  public func createInputBuffers(signatureIndex: Int = 0) throws -> [TensorBuffer] { [] }
}

extension CompiledModel {
  public var isReady: Bool { true }
}
'''


def test_the_reader_keeps_public_names_with_their_types_parameters_and_entries(tmp_path):
    repo = tmp_path / "LiteRT"
    kotlin = repo / "litert/kotlin/src/main/kotlin/com/google/ai/edge/litert"
    swift = repo / "litert/swift/Sources"
    kotlin.mkdir(parents=True)
    swift.mkdir(parents=True)
    (kotlin / "Model.kt").write_text(KOTLIN)
    (kotlin / "notes.txt").write_text("fun ignored()")
    (swift / "Api.swift").write_text(SWIFT)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "api"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()

    table = read_api(repo / ".git")
    assert table["source"]["commit"] == commit
    assert table["source"]["paths"] == {"kotlin": ["litert/kotlin/src/main/kotlin/com/google/ai/edge/litert/Model.kt"],
                                        "swift": ["litert/swift/Sources/Api.swift"]}
    assert table["kotlin"] == {
        "Accelerator": {"cases": ["NONE", "GPU"], "members": {"value": "Int"}},
        "CompiledModel": {
            "calls": {"create": [["filePath", "options", "optionalEnv"]], "createInputBuffers": [["signatureIndex"]]},
            "members": {"GpuOptions": "GpuOptions", "Options": "Options", "create": "CompiledModel",
                        "createInputBuffers": "List<TensorBuffer>"},
            "supertypes": ["JniHandle"]},
        "CompiledModel.GpuOptions": {"constructors": [["precision", "label"]],
                                     "members": {"Precision": "Precision", "label": "String?",
                                                 "precision": "Precision?"}},
        "CompiledModel.GpuOptions.Precision": {"cases": ["DEFAULT", "FP16"], "constructors": [["value"]],
                                               "members": {"value": "Int"}},
        "CompiledModel.Options": {"constructors": [["accelerators"], ["accelerators"]],
                                  "members": {"gpuOptions": "GpuOptions?"}},
    }
    assert table["swift"] == {
        "Accelerator": {"cases": ["none", "cpu", "gpu"], "supertypes": ["Int32"]},
        "CompiledModel": {"calls": {"createInputBuffers": [["signatureIndex"]],
                                    "run": [["inputs", "outputs", "signatureIndex"]]},
                          "constructors": [["filePath", "environment", "options"]],
                          "members": {"createInputBuffers": "[TensorBuffer]", "isReady": "Bool", "run": ""}},
        "Options": {"calls": {"setHardwareAccelerators": [["_"]]}, "constructors": [[]],
                    "members": {"setHardwareAccelerators": ""}},
    }

    out = tmp_path / "api.json"
    assert main([str(repo), "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == table
