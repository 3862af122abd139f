"""Conversion: torch.export program -> FP32 .tflite (litert-torch), FP16 weights (ai-edge-quantizer),
many .tflite files -> one bundle with a signature per aspect."""
