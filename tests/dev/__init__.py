"""The local SQS endpoint and its moto speed-up (`sqsbatch/dev`)."""
