"""perflearn.experiment"""
