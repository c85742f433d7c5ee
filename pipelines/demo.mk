# pipelines/demo.mk — the embedded demo (make demo).
# Placeholder until the stages land: builds everything and says what exists.
.PHONY: demo
demo: deps
	@$(MAKE) --no-print-directory all
	@echo "demo: the pipeline is being assembled; built programs: $$(ls bin 2>/dev/null | tr '\n' ' ')" >&2
