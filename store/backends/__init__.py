"""Store backends: each implements the Store protocol (store/__init__.py); only they run SQL."""
