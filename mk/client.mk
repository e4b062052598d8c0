# The client distribution as one file: build/sentinel-client.pyz, the standard library's zipapp of
# client/src/sentinel_client (reproducible: the same sources give the same bytes). Needs only python3.
.PHONY: client-zipapp

client-zipapp:
	$(PYTHON) client/build_pyz.py build/sentinel-client.pyz
