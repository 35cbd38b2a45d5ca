"""Reports: the document (:mod:`.render`: report.html, report.md, audit.json), its figures
(:mod:`.figures`), the explanations (:mod:`.explain`), the audit card (:mod:`.card`) and
MLflow logging (:mod:`.mlflow_log`). The report renders what the audit computed."""
