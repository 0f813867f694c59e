// placeholder: implemented in the next commit
