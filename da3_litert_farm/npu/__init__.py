"""Qualcomm NPUs: LiteRT's ahead-of-time compiler (aot_compiler) and Qualcomm's HTP simulator (htp_simulator), over
the QAIRT host libraries onnxruntime-qnn ships (qnn_host)."""
