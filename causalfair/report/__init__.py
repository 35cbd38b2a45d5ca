"""Reports: the document (:mod:`.render`: report.html, report.md, audit.json), its figures
(:mod:`.figures`), the audit card and explanations (:mod:`.explain`) and MLflow logging
(:mod:`.mlflow_log`). The report renders what the audit computed."""
